// A stream's thread runs kIngestNice below the daemon's other threads while the stream lasts,
// and is put back after, so that the thread serves its next call (a query) as before.
#include "daemon/ingest_priority.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <thread>

namespace flopscope::daemon {
namespace {

int NiceOfThisThread() { return getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid))); }

TEST(IngestPriorityTest, AStreamsThreadIsNicerForTheStreamAndPutBackAfter) {
  if (!IngestPriorityWorks()) GTEST_SKIP() << "this process may not put a nice value back";
  std::thread worker([] {
    const int before = NiceOfThisThread();
    {
      const ScopedIngestPriority stream;
      EXPECT_TRUE(stream.lowered());
      EXPECT_EQ(NiceOfThisThread(), before + kIngestNice);
    }
    EXPECT_EQ(NiceOfThisThread(), before);
  });
  worker.join();
}

TEST(IngestPriorityTest, OtherThreadsKeepTheirPriority) {
  if (!IngestPriorityWorks()) GTEST_SKIP() << "this process may not put a nice value back";
  const int main_before = NiceOfThisThread();
  std::thread worker([] { const ScopedIngestPriority stream; });
  worker.join();
  EXPECT_EQ(NiceOfThisThread(), main_before);  // per thread, not per process
  std::thread during([&] {
    const ScopedIngestPriority stream;
    EXPECT_EQ(NiceOfThisThread(), main_before + kIngestNice);
  });
  during.join();
  EXPECT_EQ(NiceOfThisThread(), main_before);
}

}  // namespace
}  // namespace flopscope::daemon
