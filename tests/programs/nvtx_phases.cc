// A test program with a tree that is easy to assert, and a pause in the middle so a test can start
// the daemon while the job is already running.
//
//   --before N   N times: push "before" > push "work" (pop, pop)
//   --wait-file P  then wait (up to --timeout-ms, default 20000) until file P exists
//   --after M    M times: push "after" > push "work"
//   --threads T  repeat the whole sequence on T threads at once (default 1)
//
// Tree: before (N·T calls) > work (N·T); after (M·T) > work (M·T). Prints "nvtx_phases done".
#include <nvtx3/nvToolsExt.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Options {
  int before = 3;
  int after = 0;
  int threads = 1;
  int timeout_ms = 20000;
  std::string wait_file;
};

Options ParseOptions(int argc, char** argv) {
  Options options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--before")
      options.before = std::atoi(value);
    else if (flag == "--after")
      options.after = std::atoi(value);
    else if (flag == "--threads")
      options.threads = std::atoi(value);
    else if (flag == "--timeout-ms")
      options.timeout_ms = std::atoi(value);
    else if (flag == "--wait-file")
      options.wait_file = value;
  }
  return options;
}

void PushTree(const char* outer, int times) {
  for (int i = 0; i < times; ++i) {
    nvtxRangePushA(outer);
    nvtxRangePushA("work");
    nvtxRangePop();
    nvtxRangePop();
  }
}

void WaitForFile(const std::string& path, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  struct stat st;
  while (stat(path.c_str(), &st) != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = ParseOptions(argc, argv);
  auto run = [&options] {
    PushTree("before", options.before);
    if (!options.wait_file.empty()) WaitForFile(options.wait_file, options.timeout_ms);
    PushTree("after", options.after);
  };
  std::vector<std::thread> threads;
  for (int t = 1; t < options.threads; ++t) threads.emplace_back(run);
  run();
  for (auto& thread : threads) thread.join();
  std::printf("nvtx_phases done\n");
  return 0;
}
