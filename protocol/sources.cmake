# The protocol layer's sources, relative to the repository root.
set(THD_PROTOCOL_SOURCES
  protocol/codec.cpp
  protocol/framing.cpp
)
