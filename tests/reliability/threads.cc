// threads: T threads each push/pop P NVTX ranges (the reliability campaign's row 8, "500 threads"
// and "SIGKILL of a 4-thread pusher"; docs/reliability-rerun.md). Build:
//   g++ -O2 -std=c++17 -I/usr/local/cuda/include threads.cc -o threads -ldl -lpthread
// Usage: threads T P   (P = 0: push forever, for the kill cases)
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: threads T P\n");
    return 2;
  }
  const int threads = std::atoi(argv[1]);
  const long pairs = std::atol(argv[2]);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([pairs] {
      for (long i = 0; pairs == 0 || i < pairs; ++i) {
        nvtxRangePushA("work");
        nvtxRangePop();
      }
    });
  }
  for (auto& thread : pool) thread.join();
  std::printf("%d threads x %ld pairs\n", threads, pairs);
  return 0;
}
