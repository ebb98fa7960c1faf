// What libflopscope_inject.so shows the job: only its entry points (and test hooks), and no
// dependency that could interpose on the job's own gRPC, protobuf or Abseil.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <string>

namespace flopscope::injector {
namespace {

// The lines a shell command prints; nullopt-like empty set with `ok` false when it cannot run.
std::set<std::string> Lines(const std::string& command, bool* ok) {
  std::set<std::string> lines;
  FILE* pipe = popen(command.c_str(), "r");
  *ok = pipe != nullptr;
  if (pipe == nullptr) return lines;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) {
    std::string line = buffer;
    while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) lines.insert(line);
  }
  *ok = pclose(pipe) == 0;
  return lines;
}

TEST(LibrarySurfaceTest, ExportsOnlyTheEntryPoints) {
  bool ok = false;
  const std::set<std::string> symbols = Lines(
      std::string("nm -D --defined-only ") + FLOPSCOPE_TEST_INJECTOR_PATH + " | awk '{print $3}'",
      &ok);
  if (!ok) GTEST_SKIP() << "nm (binutils) is not available";
  // The ways out of a process that skip atexit are wrapped to deliver first (entry_points.cc),
  // `kill` too: Python re-raises an unhandled KeyboardInterrupt as kill(getpid(), SIGINT).
  const std::set<std::string> expected = {"InitializeInjection",
                                          "InitializeInjectionNvtx2",
                                          "flopscope_test_get_stats",
                                          "_exit",
                                          "_Exit",
                                          "execve",
                                          "execv",
                                          "execvp",
                                          "execvpe",
                                          "kill"};
  EXPECT_EQ(symbols, expected);
}

TEST(LibrarySurfaceTest, TransportExportsOneSymbol) {
  bool ok = false;
  const std::set<std::string> symbols = Lines(
      std::string("nm -D --defined-only ") + FLOPSCOPE_TEST_TRANSPORT_PATH + " | awk '{print $3}'",
      &ok);
  if (!ok) GTEST_SKIP() << "nm (binutils) is not available";
  EXPECT_EQ(symbols, std::set<std::string>{"flopscope_transport_api"});
}

TEST(LibrarySurfaceTest, InjectorNeedsOnlyTheCRuntimeAndLibstdcxx) {
  bool ok = false;
  const std::set<std::string> needed =
      Lines(std::string("readelf -d ") + FLOPSCOPE_TEST_INJECTOR_PATH +
                " | sed -n 's/.*(NEEDED).*\\[\\(.*\\)\\]/\\1/p'",
            &ok);
  if (!ok) GTEST_SKIP() << "readelf (binutils) is not available";
  const std::set<std::string> allowed = {"libstdc++.so.6", "libm.so.6",  "libgcc_s.so.1",
                                         "libc.so.6",      "libdl.so.2", "libpthread.so.0"};
  EXPECT_FALSE(needed.empty());
  for (const std::string& library : needed) {
    EXPECT_TRUE(allowed.count(library)) << "unexpected dependency " << library;
  }
}

}  // namespace
}  // namespace flopscope::injector
