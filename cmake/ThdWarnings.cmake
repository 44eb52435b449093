# Project code builds warning-free; dependencies' headers come in as SYSTEM.
add_library(thd_warnings INTERFACE)
target_compile_options(thd_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Werror -Werror=switch>)
# Error messages and traces name files relative to the repository.
add_library(thd_build_flags INTERFACE)
target_compile_options(thd_build_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-fmacro-prefix-map=${PROJECT_SOURCE_DIR}/=>)
target_link_libraries(thd_warnings INTERFACE thd_build_flags)
