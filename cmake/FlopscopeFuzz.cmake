# libFuzzer targets: a *_fuzzer.cc beside each parser of untrusted bytes (style.md §2.3). Off by
# default; tests/fuzz/run_fuzzers.sh configures a clang build dir of its own with
# -DFLOPSCOPE_FUZZ=ON and builds only the target `flopscope_fuzzers`.
#
# In that build every flopscope source is compiled with coverage feedback (fuzzer-no-link) and
# ASan/UBSan, and UBSan findings abort, so a sanitizer report is a crash the fuzzer keeps.
option(FLOPSCOPE_FUZZ "Build the libFuzzer targets (*_fuzzer.cc); needs clang" OFF)

set(FLOPSCOPE_FUZZ_ENABLED OFF)
if(FLOPSCOPE_FUZZ)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    set(FLOPSCOPE_FUZZ_ENABLED ON)
    add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
                        -fno-omit-frame-pointer)
    add_link_options(-fsanitize=address,undefined)
    add_custom_target(flopscope_fuzzers)
    set(FLOPSCOPE_FUZZ_OUTPUT_DIR ${CMAKE_BINARY_DIR}/fuzzers)
    message(STATUS "flopscope: libFuzzer targets on (build target flopscope_fuzzers)")
  else()
    message(WARNING "FLOPSCOPE_FUZZ needs clang (CMAKE_CXX_COMPILER=clang++); fuzzers not built")
  endif()
endif()

# One libFuzzer executable (LLVMFuzzerTestOneInput in its first source), built only when
# FLOPSCOPE_FUZZ is on with clang, into ${CMAKE_BINARY_DIR}/fuzzers. Usage:
#   flopscope_fuzzer(NAME foo_fuzzer SOURCES foo_fuzzer.cc [more.cc] LIBS lib1 lib2)
function(flopscope_fuzzer)
  if(NOT FLOPSCOPE_FUZZ_ENABLED)
    return()
  endif()
  cmake_parse_arguments(F "" "NAME" "SOURCES;LIBS" ${ARGN})
  add_executable(${F_NAME} ${F_SOURCES})
  flopscope_defaults(${F_NAME})
  target_link_libraries(${F_NAME} PRIVATE ${F_LIBS})
  target_link_options(${F_NAME} PRIVATE -fsanitize=fuzzer)
  set_target_properties(${F_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${FLOPSCOPE_FUZZ_OUTPUT_DIR})
  add_dependencies(flopscope_fuzzers ${F_NAME})
endfunction()
