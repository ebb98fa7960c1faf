#include "client/run/injector_locator.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

namespace fs = std::filesystem;

// An install tree <root>/bin/flopscope + <root>/lib/libflopscope_inject.so in a temp directory.
class InjectorLocatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = absl::StrCat(::testing::TempDir(), "/locator-XXXXXX");
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    root_ = fs::canonical(pattern);
    fs::create_directories(root_ / "bin");
    fs::create_directories(root_ / "lib");
    std::ofstream(root_ / "bin" / "flopscope") << "#!/bin/true\n";
  }
  void TearDown() override { fs::remove_all(root_); }

  void InstallInjector() { std::ofstream(root_ / "lib" / "libflopscope_inject.so") << "elf"; }
  std::string SelfExe() const { return (root_ / "bin" / "flopscope").string(); }

  fs::path root_;
};

TEST_F(InjectorLocatorTest, FindsTheInjectorBesideTheBinary) {
  InstallInjector();
  absl::StatusOr<std::string> found = LocateInjector(Environment(), SelfExe());
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, fs::canonical(root_ / "lib" / "libflopscope_inject.so").string());
}

TEST_F(InjectorLocatorTest, MissingInjectorNamesThePathAndTheFix) {
  absl::StatusOr<std::string> found = LocateInjector(Environment(), SelfExe());
  EXPECT_EQ(found.status().code(), absl::StatusCode::kNotFound);
  const std::string expected_path = (root_ / "lib" / "libflopscope_inject.so").string();
  EXPECT_NE(found.status().message().find(expected_path), std::string::npos)
      << found.status().message();
  EXPECT_NE(found.status().message().find("FLOPSCOPE_INJECT_LIB"), std::string::npos);
}

TEST_F(InjectorLocatorTest, EnvironmentVariableWinsAndIsMadeAbsolute) {
  InstallInjector();
  const fs::path custom = root_ / "custom.so";
  std::ofstream(custom) << "elf";
  const std::string relative = fs::relative(custom).string();
  const Environment env = Environment::FromEntries({"FLOPSCOPE_INJECT_LIB=" + relative});
  absl::StatusOr<std::string> found = LocateInjector(env, SelfExe());
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, fs::canonical(custom).string());
}

TEST_F(InjectorLocatorTest, EnvironmentVariablePointingNowhereIsAnError) {
  InstallInjector();  // present, but the explicit setting must not silently fall back to it
  const Environment env =
      Environment::FromEntries({"FLOPSCOPE_INJECT_LIB=" + (root_ / "nope.so").string()});
  absl::StatusOr<std::string> found = LocateInjector(env, SelfExe());
  EXPECT_EQ(found.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(found.status().message().find("nope.so"), std::string::npos);
  EXPECT_NE(found.status().message().find("FLOPSCOPE_INJECT_LIB"), std::string::npos);
}

TEST_F(InjectorLocatorTest, ADirectoryIsNotAnInjector) {
  fs::create_directories(root_ / "lib" / "libflopscope_inject.so");
  EXPECT_EQ(LocateInjector(Environment(), SelfExe()).status().code(), absl::StatusCode::kNotFound);
}

TEST(SelfExecutablePathTest, NamesThisTestBinary) {
  EXPECT_EQ(fs::path(SelfExecutablePath()).filename(), "client_unittest");
}

}  // namespace
}  // namespace flopscope::client
