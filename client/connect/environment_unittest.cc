#include "client/connect/environment.h"

#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

TEST(EnvironmentTest, ReadsEntriesAndTellsUnsetFromEmpty) {
  const Environment env = Environment::FromEntries({"A=1", "EMPTY=", "EQ=x=y", "BARE"});
  EXPECT_EQ(env.Get("A"), "1");
  EXPECT_EQ(env.Get("EQ"), "x=y");
  EXPECT_EQ(env.Get("EMPTY"), "");
  EXPECT_EQ(env.GetNonEmpty("EMPTY"), std::nullopt);
  EXPECT_EQ(env.Get("BARE"), "");
  EXPECT_EQ(env.Get("MISSING"), std::nullopt);
}

TEST(EnvironmentTest, SetReplacesAndEntriesRoundTrip) {
  Environment env = Environment::FromEntries({"B=2", "A=1"});
  env.Set("A", "one");
  env.Set("C", "3");
  EXPECT_EQ(env.ToEntries(), (std::vector<std::string>{"A=one", "B=2", "C=3"}));
}

TEST(EnvironmentTest, FromProcessSeesThisProcess) {
  ASSERT_EQ(setenv("FLOPSCOPE_ENVIRONMENT_TEST", "seen", 1), 0);
  EXPECT_EQ(Environment::FromProcess().Get("FLOPSCOPE_ENVIRONMENT_TEST"), "seen");
  unsetenv("FLOPSCOPE_ENVIRONMENT_TEST");
}

}  // namespace
}  // namespace flopscope::client
