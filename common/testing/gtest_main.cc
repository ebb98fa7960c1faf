// The main() of every flopscope_unittest executable (cmake/FlopscopeTargets.cmake): GoogleTest's
// own, plus the one exit code ctest needs to tell a skipped run from a passing one. GoogleTest
// exits 0 when every selected test called GTEST_SKIP; this exits 77 (the tests' SKIP_RETURN_CODE)
// then, and only then: a run with one passing or failing test keeps GoogleTest's exit code.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

int main(int argc, char** argv) {
  ::testing::InitGoogleMock(&argc, argv);
  const int failed = RUN_ALL_TESTS();
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  if (failed == 0 && unit.skipped_test_count() > 0 && unit.successful_test_count() == 0) {
    return 77;
  }
  return failed;
}
