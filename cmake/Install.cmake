# `cmake --install BUILD [--prefix DIR]`: what a program needs to trace itself with
# vioscope or to embed its target or initiator, the tools, and what runs them.
#   include/vioscope/trace.h, target.h, initiator.h          the public APIs (and
#     trace_impl.h, what trace.h's macros expand to)
#   lib/libvioscope_trace.so.*, lib/libvioscope_trace.a     the trace runtime
#   lib/libvioscope_target-<flavour>.a                       the target and its layers
#   lib/libvioscope_initiator-<flavour>.a                    the initiator and its layers
#   lib/cmake/vioscope/                                      find_package(vioscope)
#   lib/pkgconfig/vioscope-trace.pc, vioscope-{trace,target,initiator}-<flavour>.pc
#   bin/vioscope, vioscope-off, -all, -cold-print, -all-print    the tool, each flavour
#   bin/libvioscope_bench_*.so                               modules `bench trace` loads
#   share/man/man1/vioscope.1, vioscope-<command>.1          from each command's help
#   share/bash-completion/completions/vioscope               the same
#   lib/systemd/system/vioscope-target@.service              a target per instance
#   lib/systemd/system/vioscope-target-config@.service       the same, from a --config file
include(CMakePackageConfigHelpers)

install(FILES ${PROJECT_SOURCE_DIR}/include/vioscope/trace.h
  ${PROJECT_SOURCE_DIR}/include/vioscope/trace_impl.h
  ${PROJECT_SOURCE_DIR}/include/vioscope/target.h
  ${PROJECT_SOURCE_DIR}/include/vioscope/initiator.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/vioscope)
install(TARGETS vioscope_trace_shared vioscope_trace_static ${vioscope_trace_exported}
  EXPORT vioscopeTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
foreach(flavour ${VIOSCOPE_FLAVOURS})
  vioscope_flavour_suffix(${flavour} suffix)
  install(TARGETS vioscope${suffix} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endforeach()
# `bench trace` loads these from its own directory (bench/trace_bench.c).
install(TARGETS vioscope_bench_so LIBRARY DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET vioscope_bench_lttng)
  install(TARGETS vioscope_bench_lttng LIBRARY DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

# The target and the initiator for programs of their own: per flavour, one static archive
# of each with the layers below it (merged with ar's MRI script: CMake cannot merge static
# libraries).  The trace runtime stays apart: a process must have exactly one, so the
# program links it (vioscope::trace-<flavour>, vioscope-trace-<flavour>.pc).
set(vioscope_target_layers vs_target vs_vhost vs_virtio vs_scsi vs_backend)
set(vioscope_initiator_layers vs_initiator vs_vhost vs_virtio)
foreach(flavour ${VIOSCOPE_FLAVOURS})
  foreach(api target initiator)
    set(archive ${PROJECT_BINARY_DIR}/lib/libvioscope_${api}-${flavour}.a)
    set(mri "CREATE ${archive}\n")
    set(deps "")
    foreach(layer ${vioscope_${api}_layers})
      string(APPEND mri "ADDLIB $<TARGET_FILE:${layer}-${flavour}>\n")
      list(APPEND deps ${layer}-${flavour})
    endforeach()
    string(APPEND mri "ADDLIB $<TARGET_FILE:vs_proto>\nADDLIB $<TARGET_FILE:vs_util>\nSAVE\nEND\n")
    file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/lib/vioscope_${api}-${flavour}.mri CONTENT "${mri}")
    add_custom_command(OUTPUT ${archive}
      COMMAND ${CMAKE_COMMAND} -E rm -f ${archive}
      COMMAND sh -c "'${CMAKE_AR}' -M < '${PROJECT_BINARY_DIR}/lib/vioscope_${api}-${flavour}.mri'"
      DEPENDS ${deps} vs_proto vs_util ${PROJECT_BINARY_DIR}/lib/vioscope_${api}-${flavour}.mri
      COMMENT "One archive of the ${api} (${flavour}): libvioscope_${api}-${flavour}.a" VERBATIM)
    add_custom_target(vioscope_${api}_archive-${flavour} ALL DEPENDS ${archive})
    install(FILES ${archive} DESTINATION ${CMAKE_INSTALL_LIBDIR})
  endforeach()
endforeach()

# A sanitized build's libraries call the sanitizers' runtime: whatever links them must
# link that runtime too, so the flag travels with the installed trace runtime.
set(VIOSCOPE_LINK_SANITIZE "")
if(VIOSCOPE_SANITIZE)
  set(VIOSCOPE_LINK_SANITIZE "-fsanitize=address,undefined")
elseif(VIOSCOPE_TSAN)
  set(VIOSCOPE_LINK_SANITIZE "-fsanitize=thread")
endif()

# What the target's archive needs besides the trace runtime (the CMake package and
# pkg-config say it).
set(VIOSCOPE_CMAKE_TARGET_DEPS "uring")
set(VIOSCOPE_PC_TARGET_LIBS "-luring -lpthread")
if(VIOSCOPE_HAVE_RBD)
  set(VIOSCOPE_CMAKE_TARGET_DEPS "uring;rbd;rados")
  string(APPEND VIOSCOPE_PC_TARGET_LIBS " -lrbd -lrados")
endif()

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
foreach(flavour ${VIOSCOPE_FLAVOURS})
  set(VIOSCOPE_PC_FLAVOUR ${flavour})
  foreach(api target initiator)
    set(VIOSCOPE_PC_API ${api})
    if(api STREQUAL "target")
      set(VIOSCOPE_PC_API_LIBS "${VIOSCOPE_PC_TARGET_LIBS}")
      set(VIOSCOPE_PC_API_REQUIRES ", liburing")
    else()
      set(VIOSCOPE_PC_API_LIBS "-lpthread")
      set(VIOSCOPE_PC_API_REQUIRES "")
    endif()
    configure_file(${PROJECT_SOURCE_DIR}/cmake/vioscope-api-flavour.pc.in
      ${PROJECT_BINARY_DIR}/pkgconfig/vioscope-${api}-${flavour}.pc @ONLY)
  endforeach()
endforeach()
install(DIRECTORY ${PROJECT_BINARY_DIR}/pkgconfig/
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig FILES_MATCHING PATTERN "*.pc")

# Man pages and bash completion: written by the tool from each command's help, the one
# source of its --help too (tools/cmd_help.c), so that they cannot say something else.
set(vioscope_man_dir ${PROJECT_BINARY_DIR}/man)
set(vioscope_man_stamp ${vioscope_man_dir}/.stamp)
add_custom_command(OUTPUT ${vioscope_man_stamp} ${PROJECT_BINARY_DIR}/bash-completion/vioscope
  COMMAND ${CMAKE_COMMAND} -E rm -rf ${vioscope_man_dir}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${vioscope_man_dir}
    ${PROJECT_BINARY_DIR}/bash-completion
  COMMAND $<TARGET_FILE:vioscope> help --man ${vioscope_man_dir}
  COMMAND sh -c "'$<TARGET_FILE:vioscope>' help --bash-completion > '${PROJECT_BINARY_DIR}/bash-completion/vioscope'"
  COMMAND ${CMAKE_COMMAND} -E touch ${vioscope_man_stamp}
  DEPENDS vioscope
  COMMENT "Man pages and bash completion from the commands' help" VERBATIM)
add_custom_target(vioscope_man ALL DEPENDS ${vioscope_man_stamp})
install(DIRECTORY ${vioscope_man_dir}/ DESTINATION ${CMAKE_INSTALL_MANDIR}/man1
  FILES_MATCHING PATTERN "*.1")
install(FILES ${PROJECT_BINARY_DIR}/bash-completion/vioscope
  DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)

# systemd: one target per instance (vioscope-target@NAME.service reads
# /etc/vioscope/target-NAME.conf); Type=notify, readiness from the target itself.  Made at
# install time: its ExecStart names the binary where `--prefix` put it.  lib/, not the
# multiarch libdir: systemd reads PREFIX/lib/systemd/system.
foreach(unit vioscope-target@ vioscope-target-config@)
  install(CODE "
    set(VIOSCOPE_UNIT_BINDIR \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}\")
    configure_file(\"${PROJECT_SOURCE_DIR}/cmake/${unit}.service.in\"
      \"${PROJECT_BINARY_DIR}/systemd/${unit}.service\" @ONLY)")
  install(FILES ${PROJECT_BINARY_DIR}/systemd/${unit}.service
    DESTINATION lib/systemd/system)
endforeach()
