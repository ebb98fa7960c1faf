# Warnings and defaults shared by every target flopscope owns (not by generated code).
function(flopscope_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow
                                           -Wnon-virtual-dtor -Wno-unused-parameter)
  target_include_directories(${target} PRIVATE ${CMAKE_SOURCE_DIR})
endfunction()

# A GoogleTest executable registered with ctest. Usage:
#   flopscope_unittest(NAME foo_unittest SOURCES a.cc LIBS lib1 lib2 [LABELS l1 l2])
function(flopscope_unittest)
  cmake_parse_arguments(T "" "NAME" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  flopscope_defaults(${T_NAME})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gmock GTest::gtest_main)
  set_target_properties(${T_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  add_test(NAME ${T_NAME} COMMAND ${T_NAME})
  set_tests_properties(${T_NAME} PROPERTIES
    LABELS "${T_LABELS}"
    ENVIRONMENT "FLOPSCOPE_BUILD_DIR=${CMAKE_BINARY_DIR};FLOPSCOPE_SOURCE_DIR=${CMAKE_SOURCE_DIR};FLOPSCOPE_SHARED_DATA_DIR=${FLOPSCOPE_SHARED_DATA_DIR}"
    SKIP_RETURN_CODE 77)
endfunction()
