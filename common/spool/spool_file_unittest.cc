#include "common/spool/spool_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/testing/scoped_temp_dir.h"

namespace flopscope {
namespace {

v1::UpMessage Hello(const std::string& session) {
  v1::UpMessage hello;
  hello.mutable_hello()->set_session_id(session);
  hello.mutable_hello()->set_job_id("job-s");
  return hello;
}

v1::UpMessage Batch(uint64_t seq, int ranges) {
  v1::UpMessage message;
  message.mutable_batch()->set_seq(seq);
  for (int i = 0; i < ranges; ++i) message.mutable_batch()->add_ranges()->set_instance_id(i + 1);
  return message;
}

class SpoolFileTest : public ::testing::Test {
 protected:
  std::string dir() const { return root_.path() + "/spool"; }
  std::unique_ptr<SpoolFile> Create(const std::string& session, uint64_t max_bytes = 1 << 20) {
    std::string error;
    EXPECT_TRUE(SpoolFile::PrepareDirectory(dir(), &error)) << error;
    auto file = SpoolFile::Create(dir(), Hello(session), max_bytes, &error);
    EXPECT_NE(file, nullptr) << error;
    return file;
  }

  ScopedTempDir root_;
};

TEST_F(SpoolFileTest, AnOrphanReadsBackItsBatchesBySeqWithTheLastCopyWinning) {
  std::string path;
  {
    auto file = Create("host-9-1");
    SpoolFile::Entry entry;
    ASSERT_TRUE(file->Append(3, Batch(3, 1), 1, &entry));
    ASSERT_TRUE(file->Append(1, Batch(1, 2), 2, &entry));
    ASSERT_TRUE(file->Append(2, Batch(2, 1), 1, &entry));
    ASSERT_TRUE(file->Append(2, Batch(2, 5), 5, &entry));  // spooled again (a salvage)
    path = file->path();
    std::string error;
    EXPECT_EQ(SpoolFile::OpenOrphan(path, &error), nullptr);  // its owner holds the lock
    EXPECT_EQ(error, "");
  }
  EXPECT_EQ(SpoolFile::List(dir()), (std::vector<std::string>{path}));
  std::string error;
  auto orphan = SpoolFile::OpenOrphan(path, &error);
  ASSERT_NE(orphan, nullptr) << error;
  EXPECT_EQ(orphan->hello().hello().session_id(), "host-9-1");
  ASSERT_EQ(orphan->entries().size(), 3u);
  std::vector<int> ranges;
  for (const SpoolFile::Entry& entry : orphan->entries()) {
    v1::UpMessage message;
    ASSERT_TRUE(orphan->Read(entry, &message));
    EXPECT_EQ(message.batch().seq(), entry.seq);
    EXPECT_EQ(static_cast<uint64_t>(message.batch().ranges_size()), entry.records);
    ranges.push_back(message.batch().ranges_size());
  }
  EXPECT_EQ(ranges, (std::vector<int>{2, 5, 1}));
  orphan->Remove();
  EXPECT_TRUE(SpoolFile::List(dir()).empty());
}

TEST_F(SpoolFileTest, AFrameCutShortByACrashEndsTheFile) {
  std::string path;
  {
    auto file = Create("host-9-2");
    SpoolFile::Entry entry;
    ASSERT_TRUE(file->Append(1, Batch(1, 3), 3, &entry));
    ASSERT_TRUE(file->Append(2, Batch(2, 3), 3, &entry));
    path = file->path();
  }
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  ASSERT_EQ(truncate(path.c_str(), st.st_size - 2), 0);  // the last frame loses its tail
  std::string error;
  auto orphan = SpoolFile::OpenOrphan(path, &error);
  ASSERT_NE(orphan, nullptr) << error;
  ASSERT_EQ(orphan->entries().size(), 1u);
  EXPECT_EQ(orphan->entries()[0].seq, 1u);
}

TEST_F(SpoolFileTest, TheBoundRefusesABatchAndResetKeepsTheHello) {
  auto file = Create("host-9-3", /*max_bytes=*/512);
  const uint64_t empty = file->bytes();
  SpoolFile::Entry entry;
  EXPECT_TRUE(file->Append(1, Batch(1, 2), 2, &entry));
  EXPECT_FALSE(file->Append(2, Batch(2, 200), 200, &entry));  // would pass 512 bytes
  EXPECT_GT(file->bytes(), empty);
  EXPECT_LE(file->bytes(), 512u);
  file->Reset();
  EXPECT_EQ(file->bytes(), empty);
  struct stat st;
  ASSERT_EQ(stat(file->path().c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), empty);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(SpoolFileTest, CompactionKeepsTheLiveFramesWhereReadersFindThem) {
  std::string path;
  uint64_t empty = 0;
  {
    auto file = Create("host-9-4");
    empty = file->bytes();
    SpoolFile::Entry e1, e2, e3, e4;
    ASSERT_TRUE(file->Append(1, Batch(1, 4), 4, &e1));
    ASSERT_TRUE(file->Append(2, Batch(2, 3), 3, &e2));
    ASSERT_TRUE(file->Append(3, Batch(3, 5), 5, &e3));
    ASSERT_TRUE(file->Append(4, Batch(4, 2), 2, &e4));
    const uint64_t before = file->bytes();
    // 1 and 3 acknowledged: 2 and 4 stay, in their order.
    ASSERT_TRUE(file->Compact({&e2, &e4}));
    EXPECT_EQ(file->bytes(),
              empty + SpoolFile::FrameBytes(e2.length) + SpoolFile::FrameBytes(e4.length));
    EXPECT_LT(file->bytes(), before);
    for (const SpoolFile::Entry* entry : {&e2, &e4}) {  // the caller's entries were moved
      v1::UpMessage message;
      ASSERT_TRUE(file->Read(*entry, &message));
      EXPECT_EQ(message.batch().seq(), entry->seq);
      EXPECT_EQ(static_cast<uint64_t>(message.batch().ranges_size()), entry->records);
    }
    SpoolFile::Entry e5;  // appends go on after the live frames
    ASSERT_TRUE(file->Append(5, Batch(5, 1), 1, &e5));
    path = file->path();
    std::string error;
    EXPECT_EQ(SpoolFile::OpenOrphan(path, &error), nullptr);  // still locked by its owner
    EXPECT_EQ(error, "");
  }
  EXPECT_EQ(SpoolFile::List(dir()), (std::vector<std::string>{path}));  // no copy left
  std::string error;
  auto orphan = SpoolFile::OpenOrphan(path, &error);
  ASSERT_NE(orphan, nullptr) << error;
  EXPECT_EQ(orphan->hello().hello().session_id(), "host-9-4");
  std::vector<uint64_t> seqs;
  for (const SpoolFile::Entry& entry : orphan->entries()) seqs.push_back(entry.seq);
  EXPECT_EQ(seqs, (std::vector<uint64_t>{2, 4, 5}));
  struct stat st;
  EXPECT_NE(stat((path + SpoolFile::kCopySuffix).c_str(), &st), 0);
}

TEST_F(SpoolFileTest, ABatchLargerThanTheWriteBufferReadsBackWhole) {
  auto file = Create("host-9-5", /*max_bytes=*/8 << 20);
  const v1::UpMessage big = Batch(1, 20000);  // a few hundred KiB: many 8 KiB writes
  SpoolFile::Entry entry;
  ASSERT_TRUE(file->Append(1, big, 20000, &entry));
  EXPECT_EQ(entry.length, big.ByteSizeLong());
  EXPECT_EQ(file->bytes(), file->empty_bytes() + SpoolFile::FrameBytes(entry.length));
  v1::UpMessage back;
  ASSERT_TRUE(file->Read(entry, &back));
  EXPECT_EQ(back.SerializeAsString(), big.SerializeAsString());
}

TEST_F(SpoolFileTest, AnAbandonedCompactionCopyIsRemovedAndALiveOneKept) {
  std::string error;
  ASSERT_TRUE(SpoolFile::PrepareDirectory(dir(), &error)) << error;
  const std::string abandoned = dir() + "/a.spool" + SpoolFile::kCopySuffix;
  const std::string live = dir() + "/b.spool" + SpoolFile::kCopySuffix;
  std::ofstream(abandoned) << "half a copy";
  std::ofstream(live) << "being written";
  const int fd = open(live.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);  // its writer holds it
  EXPECT_EQ(SpoolFile::RemoveAbandonedCopies(dir()), 1u);
  struct stat st;
  EXPECT_NE(stat(abandoned.c_str(), &st), 0);
  EXPECT_EQ(stat(live.c_str(), &st), 0);
  close(fd);
  EXPECT_TRUE(SpoolFile::List(dir()).empty());  // copies are never taken for spool files
}

// The race seen with 64 ranks on 2 cores: the daemon's collector opened and locked the new spool
// between the process's open and its flock; the process went on without a spool and an empty
// file stayed. The spool's name now appears only once the file is locked and holds its hello.
TEST_F(SpoolFileTest, ACollectorHoldingWhatIsAtTheSpoolsNameDoesNotStopItsCreation) {
  std::string error;
  ASSERT_TRUE(SpoolFile::PrepareDirectory(dir(), &error)) << error;
  const std::string path = dir() + "/racy.spool";
  std::ofstream(path) << "";  // what an open(O_CREAT) before the lock left
  const int collector = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(collector, 0);
  ASSERT_EQ(flock(collector, LOCK_EX | LOCK_NB), 0);
  auto file = SpoolFile::Create(dir(), Hello("racy"), 1 << 20, &error);
  ASSERT_NE(file, nullptr) << error;
  close(collector);
  EXPECT_EQ(file->path(), path);
  // Locked and complete under its name: an orphan-opener sees a live owner, not a short file.
  EXPECT_EQ(SpoolFile::OpenOrphan(path, &error), nullptr);
  EXPECT_EQ(error, "");  // "still owned"
  EXPECT_EQ(SpoolFile::List(dir()), std::vector<std::string>{path});
  struct stat st;
  EXPECT_NE(stat((path + SpoolFile::kCopySuffix).c_str(), &st), 0);  // no copy left behind
  file.reset();  // the process ends: its spool is an orphan with its hello
  auto orphan = SpoolFile::OpenOrphan(path, &error);
  ASSERT_NE(orphan, nullptr) << error;
  EXPECT_EQ(orphan->hello().hello().session_id(), "racy");
}

TEST_F(SpoolFileTest, ACopyTheRemoverHoldsForAMomentIsRetried) {
  std::string error;
  ASSERT_TRUE(SpoolFile::PrepareDirectory(dir(), &error)) << error;
  const std::string copy = dir() + "/held.spool" + SpoolFile::kCopySuffix;
  std::ofstream(copy) << "an abandoned copy";
  const int remover = open(copy.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(remover, 0);
  ASSERT_EQ(flock(remover, LOCK_EX | LOCK_NB), 0);
  std::thread release([&] {
    usleep(3000);  // past the first try
    unlink(copy.c_str());
    close(remover);
  });
  auto file = SpoolFile::Create(dir(), Hello("held"), 1 << 20, &error);
  release.join();
  ASSERT_NE(file, nullptr) << error;
  EXPECT_EQ(file->path(), dir() + "/held.spool");
  EXPECT_EQ(file->hello().hello().session_id(), "held");
}

TEST_F(SpoolFileTest, OnlyAPrivateDirectoryIsUsed) {
  const std::string shared = root_.path() + "/shared";
  ASSERT_EQ(mkdir(shared.c_str(), 0755), 0);
  std::string error;
  EXPECT_FALSE(SpoolFile::PrepareDirectory(shared, &error));
  EXPECT_NE(error.find("0700"), std::string::npos) << error;
  const std::string created = root_.path() + "/new";
  ASSERT_TRUE(SpoolFile::PrepareDirectory(created, &error)) << error;
  struct stat st;
  ASSERT_EQ(stat(created.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(SpoolFileTest, AFileThatIsNotASpoolIsRefused) {
  std::string error;
  ASSERT_TRUE(SpoolFile::PrepareDirectory(dir(), &error)) << error;
  const std::string path = dir() + "/junk.spool";
  std::ofstream(path) << "not a spool at all";
  EXPECT_EQ(SpoolFile::OpenOrphan(path, &error), nullptr);
  EXPECT_NE(error.find("not a flopscope spool file"), std::string::npos) << error;
}

// Back-dates a file's last write by `seconds`.
void Age(const std::string& path, int seconds) {
  const timespec old[2] = {{time(nullptr) - seconds, 0}, {time(nullptr) - seconds, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), old, 0), 0);
}

// What an injector older than the rename at creation left when it ended between creating its
// spool and writing into it: no record, so nothing to deliver, and nothing to keep.
TEST_F(SpoolFileTest, AnOldOrphanWithoutARecordIsRemovedAndEverythingElseKept) {
  std::string error;
  ASSERT_TRUE(SpoolFile::PrepareDirectory(dir(), &error)) << error;
  const std::string empty = dir() + "/empty.spool";
  const std::string cut = dir() + "/cut.spool";
  const std::string fresh = dir() + "/fresh.spool";
  const std::string held = dir() + "/held.spool";
  const std::string junk = dir() + "/junk.spool";
  std::ofstream(empty) << "";
  std::ofstream(cut) << "FSSP";  // cut within its magic
  std::ofstream(fresh) << "";
  std::ofstream(held) << "";
  std::ofstream(junk) << "FSXX";  // not a spool's start: someone else's file
  std::string real;
  {
    auto file = Create("real");  // a whole spool: magic and hello
    real = file->path();
  }
  for (const std::string& path : {empty, cut, held, junk, real}) Age(path, 120);
  const int holder = open(held.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(holder, 0);
  ASSERT_EQ(flock(holder, LOCK_EX | LOCK_NB), 0);  // its (old) process is about to write it

  EXPECT_FALSE(SpoolFile::RemoveEmptyOrphan(empty, geteuid() + 1, 60));  // not that uid's
  EXPECT_TRUE(SpoolFile::RemoveEmptyOrphan(empty, geteuid(), 60));
  EXPECT_TRUE(SpoolFile::RemoveEmptyOrphan(cut, geteuid(), 60));
  EXPECT_FALSE(SpoolFile::RemoveEmptyOrphan(fresh, geteuid(), 60));  // may be a live old injector's
  EXPECT_FALSE(SpoolFile::RemoveEmptyOrphan(held, geteuid(), 60));
  EXPECT_FALSE(SpoolFile::RemoveEmptyOrphan(junk, geteuid(), 60));
  EXPECT_FALSE(SpoolFile::RemoveEmptyOrphan(real, geteuid(), 60));
  EXPECT_FALSE(SpoolFile::RemoveEmptyOrphan(dir() + "/absent.spool", geteuid(), 60));
  close(holder);
  const std::vector<std::string> expected = {fresh, held, junk, real};
  EXPECT_EQ(SpoolFile::List(dir()), expected);
}

}  // namespace
}  // namespace flopscope
