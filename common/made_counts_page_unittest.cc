// Tests of the made-counts file (common/made_counts_page.h): the counts survive the writer (a
// forked child killed with SIGKILL), slots are reused with their counts, the session the file
// names is read back whole (a long command cut to fit), and the parser refuses every malformed
// file.

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
#include <tuple>
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
    MadeSession session;
    return ParseMadeCounts(bytes.data(), bytes.size(), total, &session, error);
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
  MadeSession session;
  EXPECT_FALSE(MadeCountsPage::ReadOrphan(path_, &owner, &total, &session, &error));
  EXPECT_EQ(error, "");  // the writer holds its lock: not an orphan
  page.reset();
  ASSERT_TRUE(MadeCountsPage::ReadOrphan(path_, &owner, &total, &session, &error)) << error;
  EXPECT_EQ(total, 42u);
  EXPECT_EQ(owner, geteuid());
  EXPECT_FALSE(session.known());  // made without one
}

MadeSession ASession() {
  MadeSession session;
  session.session_id = "node7-4242-1764000000000000000";
  session.job_id = "job-17";
  session.host = "node7";
  session.injector_version = "0.9.0";
  session.layout_source = "env";
  session.command = "python3 train.py --name caf\xc3\xa9";
  session.rank = 3;
  session.local_rank = 1;
  session.world_size = 8;
  session.tp_size = 2;
  session.dp_size = 4;
  session.tp_rank = 1;
  session.dp_rank = 1;
  session.pid = 4242;
  session.start_time_ns = 1764000000000000000;
  return session;
}

void ExpectSameSession(const MadeSession& a, const MadeSession& b) {
  EXPECT_EQ(a.session_id, b.session_id);
  EXPECT_EQ(a.job_id, b.job_id);
  EXPECT_EQ(a.host, b.host);
  EXPECT_EQ(a.injector_version, b.injector_version);
  EXPECT_EQ(a.layout_source, b.layout_source);
  EXPECT_EQ(a.command, b.command);
  EXPECT_EQ(std::tie(a.rank, a.local_rank, a.world_size, a.pid, a.start_time_ns),
            std::tie(b.rank, b.local_rank, b.world_size, b.pid, b.start_time_ns));
  EXPECT_EQ(std::tie(a.tp_size, a.pp_size, a.dp_size, a.tp_rank, a.pp_rank, a.dp_rank),
            std::tie(b.tp_size, b.pp_size, b.dp_size, b.tp_rank, b.pp_rank, b.dp_rank));
}

TEST_F(MadeCountsPageTest, TheSessionItNamesIsReadBackFromAnOrphan) {
  const MadeSession written = ASession();
  std::string error;
  std::unique_ptr<MadeCountsPage> page = MadeCountsPage::Create(path_, written, &error);
  ASSERT_NE(page, nullptr) << error;
  page->Acquire().Add(9);
  page.reset();
  uid_t owner = 0;
  uint64_t total = 0;
  MadeSession read;
  ASSERT_TRUE(MadeCountsPage::ReadOrphan(path_, &owner, &total, &read, &error)) << error;
  EXPECT_EQ(total, 9u);
  ASSERT_TRUE(read.known());
  ExpectSameSession(read, written);
}

// The signal a drain began for outlives a writer that never finishes it (killed here, as the
// drain's bound or a second Ctrl-C ends the process): the collector reads it back, with the
// session or without one. The first one named stays.
TEST_F(MadeCountsPageTest, TheEndSignalADrainNamedIsReadBackFromAnOrphan) {
  for (const bool named : {true, false}) {
    std::string error;
    std::unique_ptr<MadeCountsPage> page = named ? MadeCountsPage::Create(path_, ASession(), &error)
                                                 : MadeCountsPage::Create(path_, &error);
    ASSERT_NE(page, nullptr) << error;
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      page->Acquire().Add(3);
      page->NameEndSignal(SIGKILL);  // not a drain's: ignored
      page->NameEndSignal(SIGINT);
      page->NameEndSignal(SIGTERM);  // a second signal: the first stays
      raise(SIGKILL);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    page.reset();
    uid_t owner = 0;
    uint64_t total = 0;
    MadeSession read;
    ASSERT_TRUE(MadeCountsPage::ReadOrphan(path_, &owner, &total, &read, &error)) << error;
    EXPECT_EQ(total, 3u);
    EXPECT_EQ(read.known(), named);
    EXPECT_EQ(read.end_signal, SIGINT);
    unlink(path_.c_str());
  }
  // A file no drain touched names none.
  std::string error;
  ASSERT_NE(MadeCountsPage::Create(path_, ASession(), &error), nullptr) << error;
  uid_t owner = 0;
  uint64_t total = 0;
  MadeSession read;
  ASSERT_TRUE(MadeCountsPage::ReadOrphan(path_, &owner, &total, &read, &error)) << error;
  EXPECT_EQ(read.end_signal, 0);
}

TEST_F(MadeCountsPageTest, ALongCommandIsCutToFitAtACharacterBoundary) {
  MadeSession written = ASession();
  written.command.clear();
  for (size_t i = 0; i < MadeCountsPage::kSessionBytes; ++i) written.command += "\xc3\xa9";
  std::string error;
  ASSERT_NE(MadeCountsPage::Create(path_, written, &error), nullptr) << error;
  uint64_t total = 0;
  MadeSession read;
  const std::string bytes = ReadFile();
  ASSERT_TRUE(ParseMadeCounts(bytes.data(), bytes.size(), &total, &read, &error)) << error;
  EXPECT_LT(read.command.size(), MadeCountsPage::kSessionBytes);
  EXPECT_GT(read.command.size(), MadeCountsPage::kSessionBytes / 2);
  EXPECT_EQ(read.command.size() % 2, 0u);  // whole two-byte characters
  EXPECT_EQ(written.command.compare(0, read.command.size(), read.command), 0);
  EXPECT_EQ(read.session_id, written.session_id);
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
  bad[16] = 9;  // the end signal: SIGKILL is no drain's
  EXPECT_FALSE(Parse(bad, &total, &error));
  EXPECT_NE(error.find("neither SIGINT nor SIGTERM"), std::string::npos) << error;
  bad[16] = SIGTERM;
  EXPECT_TRUE(Parse(bad, &total, &error)) << error;
  bad[20] = 1;  // past the end signal
  EXPECT_FALSE(Parse(bad, &total, &error));
  EXPECT_NE(error.find("header has none"), std::string::npos) << error;

  bad = good;
  bad[MadeCountsPage::kLineBytes + sizeof(uint64_t)] = 1;  // padding after slot 0's count
  EXPECT_FALSE(Parse(bad, &total, &error));
  EXPECT_NE(error.find("between"), std::string::npos) << error;

  bad = good;
  bad[MadeCountsPage::kFileBytes - 1] = 1;  // past the session (here: none)
  EXPECT_FALSE(Parse(bad, &total, &error));
  EXPECT_NE(error.find("after its session"), std::string::npos) << error;

  bad = good;
  const uint64_t huge = ~uint64_t{0};
  std::memcpy(&bad[MadeCountsPage::kLineBytes * 2], &huge, sizeof huge);
  std::memcpy(&bad[MadeCountsPage::kLineBytes * 3], &huge, sizeof huge);
  EXPECT_FALSE(Parse(bad, &total, &error));
  EXPECT_NE(error.find("2^64"), std::string::npos) << error;
}

TEST_F(MadeCountsPageTest, ParserRefusesAMalformedSession) {
  std::string error;
  ASSERT_NE(MadeCountsPage::Create(path_, ASession(), &error), nullptr) << error;
  const std::string good = ReadFile();
  uint32_t length = 0;
  std::memcpy(&length, &good[12], sizeof length);
  ASSERT_GT(length, 0u);
  uint64_t total = 0;
  const auto set_length = [](std::string bytes, uint32_t value) {
    std::memcpy(&bytes[12], &value, sizeof value);
    return bytes;
  };
  // Shorter than its fields, longer than them (a zero string length would be left over), and
  // longer than its area.
  EXPECT_FALSE(Parse(set_length(good, length - 1), &total, &error));
  EXPECT_NE(error.find("session is malformed"), std::string::npos) << error;
  EXPECT_FALSE(Parse(set_length(good, length + 4), &total, &error));
  EXPECT_NE(error.find("session is malformed"), std::string::npos) << error;
  EXPECT_FALSE(Parse(set_length(good, MadeCountsPage::kSessionBytes + 1), &total, &error));
  EXPECT_NE(error.find("header"), std::string::npos) << error;
  // A string length that runs past the session.
  std::string bad = good;
  const size_t first_string = MadeCountsPage::kLineBytes * (MadeCountsPage::kSlots + 1) + 52;
  const uint32_t huge = 0xfffffff0u;
  std::memcpy(&bad[first_string], &huge, sizeof huge);
  EXPECT_FALSE(Parse(bad, &total, &error));
  EXPECT_NE(error.find("session is malformed"), std::string::npos) << error;
}

}  // namespace
}  // namespace flopscope
