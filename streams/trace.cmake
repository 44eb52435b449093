# The trace recorder and its Chrome/Perfetto JSON writer (THD_TRACE, DESIGN.md §8).
list(APPEND THD_STREAMS_SOURCES
  trace.cpp
  trace_clock.cpp
  trace_codec.cpp
  trace_file.cpp
  trace_json.cpp)
