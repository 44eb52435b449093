# The stream hazard checker (THD_STREAM_CHECK=1) and the vector clocks it runs on;
# included by streams/CMakeLists.txt. Paths are relative to streams/.
list(APPEND THD_STREAMS_SOURCES hazard_checker.cpp vector_clock.cpp)
