# Warnings and defaults shared by every target flopscope owns (not by generated code).
function(flopscope_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow
                                           -Wnon-virtual-dtor -Wno-unused-parameter)
  target_include_directories(${target} PRIVATE ${CMAKE_SOURCE_DIR})
endfunction()

# The main() of every unit test: GoogleTest's, exiting 77 when every selected test skipped
# (common/testing/gtest_main.cc).
add_library(flopscope_gtest_main STATIC ${CMAKE_SOURCE_DIR}/common/testing/gtest_main.cc)
target_link_libraries(flopscope_gtest_main PUBLIC GTest::gtest GTest::gmock)

set(FLOPSCOPE_GTEST_SUITES_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/FlopscopeGTestSuites.cmake)

# A GoogleTest executable, registered with ctest one test per GoogleTest suite. Usage:
#   flopscope_unittest(NAME foo_unittest SOURCES a.cc LIBS lib1 lib2 [LABELS l1 l2])
#
# Each suite is the ctest test `<NAME>.<Suite>` (`daemon_store_unittest.CatalogTest`, run alone by
# `ctest -R CatalogTest`), labelled `unit` and LABELS, running `<NAME> --gtest_filter=<Suite>.*`.
# Per suite, not per test case (gtest_discover_tests): the suites share fixtures and start
# servers in SetUpTestSuite, and ~1000 processes instead of ~240 would cost the 2-core CI more than
# it tells. The suites are listed after every link (`--gtest_list_tests`,
# FlopscopeGTestSuites.cmake, given DISCOVERY_TIMEOUT: a loaded machine starts gRPC slowly) into a
# file the ctest include file below reads, as gtest_discover_tests does with its POST_BUILD mode.
#
# Skip rule: a suite is skipped (exit 77, SKIP_RETURN_CODE) when every test case of it ran to
# GTEST_SKIP and none passed or failed; one that passes beside a skip makes the suite pass, and a
# failure fails it (flopscope_gtest_main). Not SKIP_REGULAR_EXPRESSION "[  SKIPPED ]": ctest lets
# that match win over both the passes and the failures of the other cases in the suite.
function(flopscope_unittest)
  cmake_parse_arguments(T "" "NAME" "SOURCES;LIBS;LABELS" ${ARGN})
  set(DISCOVERY_TIMEOUT 120)
  add_executable(${T_NAME} ${T_SOURCES})
  flopscope_defaults(${T_NAME})
  # The test sources get line tables only (-g1, after the build type's -g): a backtrace or a
  # debugger still names every function and line, and the code under test keeps its full -g.
  # These GoogleTest-heavy files are about half of `make test`'s compile; -g1 takes a fifth off
  # their compiler time (21% on 18 of them, docs/architecture.md).
  target_compile_options(${T_NAME} PRIVATE $<$<CONFIG:RelWithDebInfo>:-g1>)
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} flopscope_gtest_main)
  set_target_properties(${T_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)

  set(suites_file ${CMAKE_CURRENT_BINARY_DIR}/${T_NAME}_suites.cmake)
  add_custom_command(TARGET ${T_NAME} POST_BUILD
    BYPRODUCTS ${suites_file}
    COMMAND ${CMAKE_COMMAND} -D TEST_EXECUTABLE=$<TARGET_FILE:${T_NAME}>
            -D SUITES_FILE=${suites_file} -D DISCOVERY_TIMEOUT=${DISCOVERY_TIMEOUT}
            -P ${FLOPSCOPE_GTEST_SUITES_SCRIPT}
    VERBATIM)

  set(labels unit ${T_LABELS})
  set(environment "FLOPSCOPE_BUILD_DIR=${CMAKE_BINARY_DIR};FLOPSCOPE_SOURCE_DIR=${CMAKE_SOURCE_DIR};FLOPSCOPE_SHARED_DATA_DIR=${FLOPSCOPE_SHARED_DATA_DIR}")
  set(include_file ${CMAKE_CURRENT_BINARY_DIR}/${T_NAME}_include.cmake)
  file(GENERATE OUTPUT ${include_file} CONTENT "\
if(EXISTS [==[${suites_file}]==])
  include([==[${suites_file}]==])
  foreach(suite IN LISTS FLOPSCOPE_GTEST_SUITES)
    add_test(${T_NAME}.\${suite} [==[$<TARGET_FILE:${T_NAME}>]==] --gtest_filter=\${suite}.*)
    set_tests_properties(${T_NAME}.\${suite} PROPERTIES
      LABELS [==[${labels}]==]
      ENVIRONMENT [==[${environment}]==]
      SKIP_RETURN_CODE 77
      WORKING_DIRECTORY [==[${CMAKE_CURRENT_BINARY_DIR}]==])
    if(suite MATCHES \"^DISABLED_\")
      set_tests_properties(${T_NAME}.\${suite} PROPERTIES DISABLED TRUE)
    endif()
  endforeach()
else()
  add_test(${T_NAME}_NOT_BUILT ${T_NAME}_NOT_BUILT)
  set_tests_properties(${T_NAME}_NOT_BUILT PROPERTIES LABELS [==[${labels}]==])
endif()
")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${include_file})
endfunction()

# A Python unittest test run by tests/unittest_runner.py, the one place that turns its result into
# ctest's: failed (1), skipped (77: every test case skipped, SKIP_RETURN_CODE) or passed (0: at
# least one passed, none failed; the skip reasons are printed). Usage:
#   flopscope_python_test(NAME foo TEST test_foo.py|folder [ARGS a b] [LABELS l1 l2] [TIMEOUT s]
#                         [WORKING_DIRECTORY dir] [ENVIRONMENT A=1 B=2] [PYTHON exe])
# TEST is relative to the calling folder; WORKING_DIRECTORY defaults to its build folder, PYTHON to
# FLOPSCOPE_TEST_PYTHON (tests/CMakeLists.txt: Debian's, with grpcio).
function(flopscope_python_test)
  cmake_parse_arguments(T "" "NAME;TEST;TIMEOUT;WORKING_DIRECTORY;PYTHON"
                        "ARGS;LABELS;ENVIRONMENT" ${ARGN})
  if(NOT T_PYTHON)
    set(T_PYTHON ${FLOPSCOPE_TEST_PYTHON})
  endif()
  if(NOT T_WORKING_DIRECTORY)
    set(T_WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  endif()
  get_filename_component(test ${T_TEST} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
  add_test(NAME ${T_NAME}
           COMMAND ${T_PYTHON} ${CMAKE_SOURCE_DIR}/tests/unittest_runner.py ${test} ${T_ARGS}
           WORKING_DIRECTORY ${T_WORKING_DIRECTORY})
  set_tests_properties(${T_NAME} PROPERTIES
    LABELS "${T_LABELS}"
    SKIP_RETURN_CODE 77
    ENVIRONMENT "${T_ENVIRONMENT};PYTHONDONTWRITEBYTECODE=1")
  if(T_TIMEOUT)
    set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT})
  endif()
endfunction()
