# `cmake --install BUILD [--prefix DIR]`: what a program needs to trace itself with
# vioscope, and the tool that reads the traces.
#   include/vioscope/trace.h, trace_impl.h (what its macros expand to)
#   lib/libvioscope_trace.so.*, lib/libvioscope_trace.a     the runtime
#   lib/cmake/vioscope/                                      find_package(vioscope)
#   lib/pkgconfig/vioscope-trace.pc, vioscope-trace-<flavour>.pc
#   bin/vioscope                                             the tool (cold flavour)
include(CMakePackageConfigHelpers)

install(FILES ${PROJECT_SOURCE_DIR}/include/vioscope/trace.h
  ${PROJECT_SOURCE_DIR}/include/vioscope/trace_impl.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/vioscope)
install(TARGETS vioscope_trace_shared vioscope_trace_static ${vioscope_trace_exported}
  EXPORT vioscopeTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS vioscope RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

set(vioscope_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/vioscope)
install(EXPORT vioscopeTargets NAMESPACE vioscope:: DESTINATION ${vioscope_cmake_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/vioscopeConfig.cmake.in
  ${PROJECT_BINARY_DIR}/vioscopeConfig.cmake INSTALL_DESTINATION ${vioscope_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/vioscopeConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/vioscopeConfig.cmake
  ${PROJECT_BINARY_DIR}/vioscopeConfigVersion.cmake DESTINATION ${vioscope_cmake_dir})

# pkg-config: vioscope-trace (the runtime) and one file per flavour that adds the
# flavour's definitions to it.  Relocatable: the prefix is found from the .pc file.
file(RELATIVE_PATH VIOSCOPE_PC_UP "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" VIOSCOPE_PC_UP "${VIOSCOPE_PC_UP}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/vioscope-trace.pc.in
  ${PROJECT_BINARY_DIR}/pkgconfig/vioscope-trace.pc @ONLY)
foreach(flavour ${VIOSCOPE_FLAVOURS})
  vioscope_flavour_defs(${flavour} tier print)
  set(VIOSCOPE_PC_FLAVOUR ${flavour})
  set(VIOSCOPE_PC_TIER ${tier})
  set(VIOSCOPE_PC_PRINT ${print})
  configure_file(${PROJECT_SOURCE_DIR}/cmake/vioscope-trace-flavour.pc.in
    ${PROJECT_BINARY_DIR}/pkgconfig/vioscope-trace-${flavour}.pc @ONLY)
endforeach()
install(DIRECTORY ${PROJECT_BINARY_DIR}/pkgconfig/
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig FILES_MATCHING PATTERN "*.pc")
