# Trace build flavours.
#
# Every flavour of every traced library is built side by side in one build tree, so
# benchmarks can compare them in one run.  A flavour is two compile definitions:
#   VS_TRACE_TIER  0 = off, 1 = cold path only (default), 2 = all paths
#   VS_TRACE_PRINT 0 = binary events into rings, 1 = formatted text, synchronously
# A program picks its flavour with one option: the library target it links,
# e.g. vioscope::trace-all or vioscope::trace-cold-print.  The flavour only changes
# what call sites compile to: every flavour links the same runtime, and objects (or
# translation units) of different flavours can be mixed in one program.
#
# vioscope's own libraries are providers named after their layer (vs_scsi: scsi);
# its executables are the provider `vioscope`.

set(VIOSCOPE_FLAVOURS off cold all cold-print all-print)

function(vioscope_flavour_defs flavour out_tier out_print)
  if(flavour STREQUAL "off")
    set(tier 0)
    set(print 0)
  elseif(flavour STREQUAL "cold")
    set(tier 1)
    set(print 0)
  elseif(flavour STREQUAL "all")
    set(tier 2)
    set(print 0)
  elseif(flavour STREQUAL "cold-print")
    set(tier 1)
    set(print 1)
  elseif(flavour STREQUAL "all-print")
    set(tier 2)
    set(print 1)
  else()
    message(FATAL_ERROR "unknown trace flavour '${flavour}' (one of: ${VIOSCOPE_FLAVOURS})")
  endif()
  set(${out_tier} ${tier} PARENT_SCOPE)
  set(${out_print} ${print} PARENT_SCOPE)
endfunction()

# Suffix used in target and binary names: "" for the default cold flavour.
function(vioscope_flavour_suffix flavour out)
  if(flavour STREQUAL "cold")
    set(${out} "" PARENT_SCOPE)
  else()
    set(${out} "-${flavour}" PARENT_SCOPE)
  endif()
endfunction()

# vioscope_add_flavoured_library(NAME SOURCES... [LINK libs-without-flavour...] [PUBLIC_LINK external...])
# Creates NAME-off, NAME-cold, NAME-all, NAME-cold-print, NAME-all-print static libraries.
# Libraries named under LINK are themselves flavoured: NAME-<flavour> links LIB-<flavour>.
# The trace provider is NAME without its "vs_" prefix.
function(vioscope_add_flavoured_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LINK;PUBLIC_LINK" ${ARGN})
  string(REGEX REPLACE "^vs_" "" provider ${name})
  foreach(flavour ${VIOSCOPE_FLAVOURS})
    set(t ${name}-${flavour})
    add_library(${t} STATIC ${ARG_SOURCES})
    # Users see the public headers only; src/ (the layers' own interfaces) is private.
    target_include_directories(${t} PUBLIC ${PROJECT_SOURCE_DIR}/include
      PRIVATE ${PROJECT_SOURCE_DIR}/src)
    target_compile_definitions(${t} PRIVATE VS_TRACE_PROVIDER=${provider})
    target_link_libraries(${t} PUBLIC vioscope_trace-${flavour}-static)
    foreach(dep ${ARG_LINK})
      target_link_libraries(${t} PUBLIC ${dep}-${flavour})
    endforeach()
    if(ARG_PUBLIC_LINK)
      target_link_libraries(${t} PUBLIC ${ARG_PUBLIC_LINK})
    endif()
  endforeach()
endfunction()

# vioscope_add_flavoured_executable(NAME SOURCES... [LINK flavoured-libs...] [PUBLIC_LINK external...])
# Creates NAME (cold), NAME-off, NAME-all, NAME-cold-print, NAME-all-print.
function(vioscope_add_flavoured_executable name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LINK;PUBLIC_LINK" ${ARGN})
  foreach(flavour ${VIOSCOPE_FLAVOURS})
    vioscope_flavour_suffix(${flavour} suffix)
    set(t ${name}${suffix})
    add_executable(${t} ${ARG_SOURCES})
    target_include_directories(${t} PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR})
    target_compile_definitions(${t} PRIVATE VS_TRACE_PROVIDER=${name})
    target_link_libraries(${t} PRIVATE vioscope_trace-${flavour}-static)
    foreach(dep ${ARG_LINK})
      target_link_libraries(${t} PRIVATE ${dep}-${flavour})
    endforeach()
    if(ARG_PUBLIC_LINK)
      target_link_libraries(${t} PRIVATE ${ARG_PUBLIC_LINK})
    endif()
  endforeach()
endfunction()
