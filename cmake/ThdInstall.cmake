# Installs libthd_* with their public headers and exports them as the CMake package
# `thd`, so an outside project can write
#   find_package(thd REQUIRED)
#   target_link_libraries(app PRIVATE thd::thd)
# tests/install/ builds such a project against the installed tree.
include(CMakePackageConfigHelpers)

# Every target a consumer may link, exported as thd::<EXPORT_NAME>. A new layer adds
# its library here (and declares its headers with $<INSTALL_INTERFACE:include>, as
# tensor/ does); `thd` is the umbrella that links all of them.
set(THD_INSTALL_TARGETS
  thd              # thd::thd
  thd_tensor       # thd::tensor
  thd_datachannel  # thd::datachannel
  thd_streams      # thd::streams
  thd_runtime      # thd::runtime (protocol/, master/, worker/)
)

set(THD_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/thd)

# A static library passes its private link dependencies on to whoever links it, so
# a static build must export the build-only helpers too, and the package config must
# find fmt and OpenBLAS. A shared build exports only THD_INSTALL_TARGETS.
set(THD_PACKAGE_STATIC OFF)
foreach(_thd_target IN LISTS THD_INSTALL_TARGETS)
  get_target_property(_thd_type ${_thd_target} TYPE)
  if(_thd_type STREQUAL "STATIC_LIBRARY")
    set(THD_PACKAGE_STATIC ON)
  endif()
endforeach()
if(THD_PACKAGE_STATIC)
  foreach(_thd_helper thd_blas thd_warnings thd_build_flags)
    string(REPLACE "thd_" "detail_" _thd_name ${_thd_helper})
    set_target_properties(${_thd_helper} PROPERTIES EXPORT_NAME ${_thd_name})
    list(APPEND THD_INSTALL_TARGETS ${_thd_helper})
  endforeach()
endif()

install(TARGETS ${THD_INSTALL_TARGETS}
  EXPORT thdTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Public headers only: include/thd/ holds nothing else, and config.h is generated.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/thd
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/include/thd/config.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/thd)

install(EXPORT thdTargets
  NAMESPACE thd::
  DESTINATION ${THD_INSTALL_CMAKEDIR})

configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/thdConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/thdConfig.cmake
  INSTALL_DESTINATION ${THD_INSTALL_CMAKEDIR})
# The major version marks API breaks: find_package(thd 1.2) accepts any 1.y >= 1.2.
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/cmake/thdConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/cmake/thdConfig.cmake
  ${PROJECT_BINARY_DIR}/cmake/thdConfigVersion.cmake
  DESTINATION ${THD_INSTALL_CMAKEDIR})
