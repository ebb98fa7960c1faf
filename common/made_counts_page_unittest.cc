// Tests of the made-counts file (common/made_counts_page.h): the counts survive the writer (a
// forked child killed with SIGKILL), slots are reused with their counts, and the parser
// refuses every malformed file.

#include "common/made_counts_page.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace flopscope {
namespace {

class MadeCountsPageTest : public testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/made-counts-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/session.made";
  }
  void TearDown() override {
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }

  std::string ReadFile() const {
    std::ifstream in(path_, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  bool Parse(const std::string& bytes, uint64_t* total, std::string* error) const {
    return ParseMadeCounts(bytes.data(), bytes.size(), total, error);
  }

  std::string dir_;
  std::string path_;
};

TEST_F(MadeCountsPageTest, CountsSurviveAWriterKilledBySigkill) {
  std::string error;
  std::unique_ptr<MadeCountsPage> page = MadeCountsPage::Create(path_, &error);
  ASSERT_NE(page, nullptr) << error;
  constexpr uint64_t kFirst = 1234, kSecond = 567;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    MadeCountsPage::Counter a = page->Acquire();
    MadeCountsPage::Counter b = page->Acquire();
    for (uint64_t i = 0; i < kFirst; ++i) a.Add(1);
    b.Add(kSecond);
    kill(getpid(), SIGKILL);
    _exit(1);  // not reached
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  page.reset();
  uint64_t total = 0;
  ASSERT_TRUE(Parse(ReadFile(), &total, &error)) << error;
  EXPECT_EQ(total, kFirst + kSecond);
}

TEST_F(MadeCountsPageTest, AnOrphanIsReadOnlyOnceItsWriterIsGone) {
  std::string error;
  std::unique_ptr<MadeCountsPage> page = MadeCountsPage::Create(path_, &error);
  ASSERT_NE(page, nullptr) << error;
  MadeCountsPage::Counter counter = page->Acquire();
  counter.Add(42);
  uid_t owner = 0;
  uint64_t total = 0;
  EXPECT_FALSE(MadeCountsPage::ReadOrphan(path_, &owner, &total, &error));
  EXPECT_EQ(error, "");  // the writer holds its lock: not an orphan
  page.reset();
  ASSERT_TRUE(MadeCountsPage::ReadOrphan(path_, &owner, &total, &error)) << error;
  EXPECT_EQ(total, 42u);
  EXPECT_EQ(owner, geteuid());
}

TEST_F(MadeCountsPageTest, RemoveDeletesTheFile) {
  std::string error;
  std::unique_ptr<MadeCountsPage> page = MadeCountsPage::Create(path_, &error);
  ASSERT_NE(page, nullptr) << error;
  page->Remove();
  EXPECT_NE(access(path_.c_str(), F_OK), 0);
}

TEST_F(MadeCountsPageTest, ThreadsCountInOwnSlotsAndAReleasedSlotKeepsItsCount) {
  std::string error;
  std::unique_ptr<MadeCountsPage> page = MadeCountsPage::Create(path_, &error);
  ASSERT_NE(page, nullptr) << error;
  constexpr int kThreads = 4;
  constexpr uint64_t kEach = 100000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&page] {
      MadeCountsPage::Counter counter = page->Acquire();
      EXPECT_FALSE(counter.shared());
      for (uint64_t i = 0; i < kEach; ++i) counter.Add(1);
      page->Release(counter);
    });
  }
  for (std::thread& thread : threads) thread.join();
  // A later writer gets a released slot and adds to what it holds.
  MadeCountsPage::Counter later = page->Acquire();
  later.Add(7);
  EXPECT_EQ(page->Total(), kThreads * kEach + 7);
  uint64_t total = 0;
  ASSERT_TRUE(Parse(ReadFile(), &total, &error)) << error;
  EXPECT_EQ(total, page->Total());
}

TEST_F(MadeCountsPageTest, WritersBeyondTheSlotsShareSlotZero) {
  std::string error;
  std::unique_ptr<MadeCountsPage> page = MadeCountsPage::Create(path_, &error);
  ASSERT_NE(page, nullptr) << error;
  std::vector<MadeCountsPage::Counter> owned;
  for (uint32_t i = 1; i < MadeCountsPage::kSlots; ++i) {
    owned.push_back(page->Acquire());
    ASSERT_FALSE(owned.back().shared());
    owned.back().Add(1);
  }
  MadeCountsPage::Counter shared = page->Acquire();
  MadeCountsPage::Counter shared_too = page->Acquire();
  EXPECT_TRUE(shared.shared());
  shared.Add(2);
  shared_too.Add(3);
  page->Release(shared);  // not an own slot: nothing to give back
  EXPECT_EQ(page->Total(), owned.size() + 5);
  page->Release(owned.front());
  EXPECT_FALSE(page->Acquire().shared());
}

TEST_F(MadeCountsPageTest, CreateRefusesAnExistingFile) {
  std::string error;
  ASSERT_NE(MadeCountsPage::Create(path_, &error), nullptr) << error;
  EXPECT_EQ(MadeCountsPage::Create(path_, &error), nullptr);
  EXPECT_NE(error.find(path_), std::string::npos) << error;
}

TEST_F(MadeCountsPageTest, ParserRefusesMalformedFiles) {
  std::string error;
  {
    std::unique_ptr<MadeCountsPage> page = MadeCountsPage::Create(path_, &error);
    ASSERT_NE(page, nullptr) << error;
    page->Acquire().Add(5);
  }
  const std::string good = ReadFile();
  uint64_t total = 0;
  ASSERT_TRUE(Parse(good, &total, &error)) << error;
  EXPECT_EQ(total, 5u);

  EXPECT_FALSE(Parse(good.substr(0, good.size() - 1), &total, &error));
  EXPECT_NE(error.find("bytes, not"), std::string::npos) << error;
  EXPECT_FALSE(Parse(good + '\0', &total, &error));

  std::string bad = good;
  bad[0] = 'X';
  EXPECT_FALSE(Parse(bad, &total, &error));
  EXPECT_NE(error.find("header"), std::string::npos) << error;

  bad = good;
  bad[MadeCountsPage::kLineBytes + sizeof(uint64_t)] = 1;  // padding after slot 0's count
  EXPECT_FALSE(Parse(bad, &total, &error));
  EXPECT_NE(error.find("between"), std::string::npos) << error;

  bad = good;
  const uint64_t huge = ~uint64_t{0};
  std::memcpy(&bad[MadeCountsPage::kLineBytes * 2], &huge, sizeof huge);
  std::memcpy(&bad[MadeCountsPage::kLineBytes * 3], &huge, sizeof huge);
  EXPECT_FALSE(Parse(bad, &total, &error));
  EXPECT_NE(error.find("2^64"), std::string::npos) << error;
}

}  // namespace
}  // namespace flopscope
