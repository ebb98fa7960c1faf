# Lists the GoogleTest suites of one test executable, run after each link of a flopscope_unittest
# target (FlopscopeTargets.cmake) in script mode:
#   cmake -D TEST_EXECUTABLE=<exe> -D SUITES_FILE=<out.cmake> -D DISCOVERY_TIMEOUT=<s> -P <this>
# Writes SUITES_FILE, which sets FLOPSCOPE_GTEST_SUITES to the suite names in the order GoogleTest
# lists them (`Suite`, `Instance/Suite` for parameterized suites, `Suite/0` for typed ones). The
# ctest include file beside it registers one test per suite.
execute_process(COMMAND "${TEST_EXECUTABLE}" --gtest_list_tests
                TIMEOUT ${DISCOVERY_TIMEOUT}
                RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${TEST_EXECUTABLE} --gtest_list_tests failed (${result}):\n${output}")
endif()

# A suite is a line that does not start with a space and ends its name with '.', optionally
# followed by GoogleTest's "  # TypeParam = ..." comment; its tests are the indented lines below.
string(REPLACE ";" "," output "${output}")
string(REGEX MATCHALL "[^\n]+" lines "${output}")
set(suites)
foreach(line IN LISTS lines)
  if(line MATCHES "^([^ #][^ ]*)\\.( .*)?$")
    list(APPEND suites "${CMAKE_MATCH_1}")
  endif()
endforeach()
if(NOT suites)
  message(FATAL_ERROR "${TEST_EXECUTABLE} --gtest_list_tests listed no suite:\n${output}")
endif()
file(WRITE "${SUITES_FILE}" "set(FLOPSCOPE_GTEST_SUITES [==[${suites}]==])\n")
