// FreedMemoryTrimmer (malloc_settings.h): memory freed inside an arena, which glibc keeps
// resident, goes back to the system on the trimmer's next pass.
#include "daemon/server/malloc_settings.h"

#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

#include "absl/time/clock.h"

namespace flopscope::daemon {
namespace {

// Written through, so that the compiler cannot drop a malloc and free pair.
void* volatile sink = nullptr;

// The process's resident memory (/proc/self/statm), -1 when unreadable.
int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0;
  int64_t resident = -1;
  statm >> size >> resident;
  return resident < 0 ? -1 : resident * sysconf(_SC_PAGESIZE);
}

void* Touched(size_t bytes) {
  sink = std::malloc(bytes);
  std::memset(sink, 1, bytes);
  return sink;
}

#ifdef __GLIBC__
TEST(FreedMemoryTrimmerTest, MemoryFreedInsideTheHeapGoesBack) {
  constexpr size_t kBlock = size_t{1} << 20;
  // Freeing a block mapped on its own raises glibc's mmap threshold past it: the next blocks
  // come from the heap.
  std::free(Touched(8 * kBlock));
  std::vector<void*> blocks;
  for (int i = 0; i < 16; ++i) blocks.push_back(Touched(kBlock));
  void* last = Touched(kBlock);  // kept: the heap cannot simply shrink from its top
  for (void* block : blocks) std::free(block);
  const int64_t before = ResidentBytes();
  EXPECT_TRUE(FreedMemoryTrimmer::TrimNow());
  // The 16 MiB freed in the heap's middle went back (most of it: chunk headers stay).
  EXPECT_LE(ResidentBytes(), before - static_cast<int64_t>(12 * kBlock));
  std::free(last);
}
#endif

TEST(FreedMemoryTrimmerTest, PassesRunEveryPeriodUntilDestroyed) {
  FreedMemoryTrimmer trimmer(absl::Milliseconds(10));
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (trimmer.passes() < 3 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_GE(trimmer.passes(), 3u);
  EXPECT_LE(trimmer.released(), trimmer.passes());
}

}  // namespace
}  // namespace flopscope::daemon
