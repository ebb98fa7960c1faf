#include "injector/injector_config.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <map>
#include <string>

#include "common/spool_dir.h"
#include "common/testing/scoped_temp_dir.h"

namespace flopscope::injector {
namespace {

EnvLookup Lookup(const std::map<std::string, std::string>& vars) {
  return [&vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(InjectorConfigTest, DefaultsWorkWithAnEmptyEnvironment) {
  const std::map<std::string, std::string> vars;
  const InjectorConfig config = ConfigFromEnvironment(Lookup(vars));
  EXPECT_EQ(config.buffer_bytes, 64ull << 20);
  EXPECT_EQ(config.flush_ms, 100u);
  EXPECT_EQ(config.exit_timeout_ms, 5000u);
  EXPECT_EQ(config.target.rfind("unix:", 0), 0u) << config.target;
  EXPECT_TRUE(config.dump_path.empty());
  EXPECT_FALSE(config.realtime_clock);
  EXPECT_TRUE(config.warnings.empty());
}

TEST(InjectorConfigTest, ReadsEveryKnob) {
  const std::map<std::string, std::string> vars = {
      {"FLOPSCOPE_BUFFER_MB", "8"},          {"FLOPSCOPE_FLUSH_MS", "20"},
      {"FLOPSCOPE_EXIT_TIMEOUT_MS", "250"},  {"FLOPSCOPE_SOCKET", "/tmp/d.sock"},
      {"FLOPSCOPE_DEBUG_DUMP", "/tmp/dump"}, {"FLOPSCOPE_TRANSPORT_PATH", "/x/t.so"},
      {"FLOPSCOPE_CLOCK", "realtime"}};
  const InjectorConfig config = ConfigFromEnvironment(Lookup(vars));
  EXPECT_EQ(config.buffer_bytes, 8ull << 20);
  EXPECT_EQ(config.flush_ms, 20u);
  EXPECT_EQ(config.exit_timeout_ms, 250u);
  EXPECT_EQ(config.target, "unix:/tmp/d.sock");
  EXPECT_EQ(config.dump_path, "/tmp/dump");
  EXPECT_EQ(config.transport_path, "/x/t.so");
  EXPECT_TRUE(config.realtime_clock);
}

TEST(InjectorConfigTest, MalformedValuesFallBackWithAWarning) {
  const std::map<std::string, std::string> vars = {{"FLOPSCOPE_BUFFER_MB", "lots"},
                                                   {"FLOPSCOPE_FLUSH_MS", "0"},
                                                   {"FLOPSCOPE_EXIT_TIMEOUT_MS", "-5"},
                                                   {"FLOPSCOPE_CLOCK", "sundial"}};
  const InjectorConfig config = ConfigFromEnvironment(Lookup(vars));
  EXPECT_EQ(config.buffer_bytes, 64ull << 20);
  EXPECT_EQ(config.flush_ms, 100u);
  EXPECT_EQ(config.exit_timeout_ms, 5000u);
  EXPECT_FALSE(config.realtime_clock);
  ASSERT_EQ(config.warnings.size(), 4u);
  EXPECT_NE(config.warnings[0].find("FLOPSCOPE_BUFFER_MB='lots'"), std::string::npos);
}

// Issue 32: a spool goes to the folder of the daemon the session was aimed at, so that no other
// daemon of the user's delivers it.
TEST(InjectorConfigTest, TheSpoolIsTheFolderOfTheDaemonAimedAt) {
  ScopedTempDir dir;
  std::map<std::string, std::string> vars = {{"FLOPSCOPE_SOCKET", "/tmp/a/d.sock"},
                                             {"FLOPSCOPE_SPOOL_DIR", dir.path() + "/spool"}};
  InjectorConfig a = ConfigFromEnvironment(Lookup(vars));
  ResolveSpoolDirectory(&a, dir.path());
  vars["FLOPSCOPE_SOCKET"] = "/tmp/b/d.sock";
  InjectorConfig b = ConfigFromEnvironment(Lookup(vars));
  ResolveSpoolDirectory(&b, dir.path());
  EXPECT_EQ(a.spool_dir, dir.path() + "/spool/" + SpoolDestinationName("unix:/tmp/a/d.sock"));
  EXPECT_NE(a.spool_dir, b.spool_dir);
  struct stat st;
  ASSERT_EQ(lstat(a.spool_dir.c_str(), &st), 0) << a.spool_dir;
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_TRUE(a.warnings.empty());
}

}  // namespace
}  // namespace flopscope::injector
