# Run at every build (tools/CMakeLists.txt): the commit the binaries are built from, for
# `--version` and every --json output.  Writes OUT only when it changed, so that a build
# with nothing new relinks nothing.
#   cmake -DSRC=<source dir> -DOUT=<file> -DIN=<template> -DVERSION=<x.y.z> -P Version.cmake
set(VIOSCOPE_COMMIT unknown)
set(VIOSCOPE_COMMIT_DATE unknown)
find_package(Git QUIET)
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} -C ${SRC} rev-parse --short=12 HEAD
    OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc ERROR_QUIET)
  if(rc EQUAL 0 AND commit)
    set(VIOSCOPE_COMMIT ${commit})
    execute_process(COMMAND ${GIT_EXECUTABLE} -C ${SRC} log -1 --format=%cs HEAD
      OUTPUT_VARIABLE date OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(date)
      set(VIOSCOPE_COMMIT_DATE ${date})
    endif()
    # Tracked files changed since the commit: the binary is not that commit.
    execute_process(COMMAND ${GIT_EXECUTABLE} -C ${SRC} diff --quiet HEAD --
      RESULT_VARIABLE dirty ERROR_QUIET)
    if(NOT dirty EQUAL 0)
      set(VIOSCOPE_COMMIT "${VIOSCOPE_COMMIT}-dirty")
    endif()
  endif()
endif()
set(VIOSCOPE_VERSION ${VERSION})
configure_file(${IN} ${OUT}.new @ONLY)
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${OUT}.new ${OUT})
file(REMOVE ${OUT}.new)
