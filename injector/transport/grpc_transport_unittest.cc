#include "injector/transport/grpc_transport.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "injector/transport/batch_encoder.h"
#include "injector/transport/testing/fake_collector.h"
#include "injector/transport/testing/test_batch.h"

namespace flopscope::transport {
namespace {

using std::chrono::milliseconds;
using testing::FakeCollector;
using testing::Str;
using testing::TempDir;
using testing::TestBatch;
using testing::TestHello;

constexpr int64_t kLongWaitMs = 10000;  // generous: only reached when something is broken

class GrpcTransportTest : public ::testing::Test {
 protected:
  std::string socket() const { return dir_.path() + "/collector.sock"; }

  std::string spool_dir() const { return dir_.path() + "/spool"; }
  std::vector<std::string> SpoolFiles() const { return SpoolFile::List(spool_dir()); }

  // With `spool`, the transport spools to spool_dir() (bounded by 1 MiB) as session `session`.
  std::unique_ptr<GrpcTransport> Connect(uint64_t max_pending_bytes = 0, bool spool = false,
                                         const std::string& session = "host-1-2") {
    target_ = "unix:" + socket();
    spool_dir_ = spool_dir();
    session_ = session;
    fs_transport_options options{};
    options.target = Str(target_);
    options.max_pending_bytes = max_pending_bytes;
    options.reconnect_initial_ms = 10;
    options.reconnect_max_ms = 50;
    if (spool) {
      options.spool_dir = Str(spool_dir_);
      options.max_spool_bytes = 1 << 20;
    }
    fs_hello hello = TestHello();
    hello.session_id = Str(session_);
    std::string error;
    auto transport = GrpcTransport::Create(options, hello, &error);
    EXPECT_NE(transport, nullptr) << error;
    return transport;
  }

  static std::vector<uint64_t> Seqs(const std::vector<v1::Batch>& batches) {
    std::vector<uint64_t> seqs;
    for (const auto& batch : batches) seqs.push_back(batch.seq());
    return seqs;
  }

  TempDir dir_;
  std::string target_;
  std::string spool_dir_;
  std::string session_;
};

uint64_t RangesIn(const std::vector<v1::Batch>& batches) {
  uint64_t ranges = 0;
  for (const auto& batch : batches) ranges += batch.ranges_size();
  return ranges;
}

TEST_F(GrpcTransportTest, SendsHelloThenBatchesAndCollectsAcks) {
  FakeCollector collector(socket());
  auto transport = Connect();
  TestBatch a(1, 1, 2), b(2, 1, 3), c(3, 0, 1);
  transport->Submit(a.view());
  transport->Submit(b.view());
  transport->Submit(c.view(/*final=*/true));
  ASSERT_TRUE(transport->Flush(kLongWaitMs));
  EXPECT_EQ(Seqs(collector.committed()), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_TRUE(collector.committed().back().final());
  ASSERT_EQ(collector.hellos().size(), 1u);
  EXPECT_EQ(collector.hellos()[0].job_id(), "job-t");
  const fs_transport_stats stats = transport->Stats();
  EXPECT_EQ(stats.batches_submitted, 3u);
  EXPECT_EQ(stats.batches_acked, 3u);
  EXPECT_EQ(stats.bytes_pending, 0u);
  EXPECT_EQ(stats.records_dropped, 0u);
}

// ABI v2's counter records (kernel FLOPs, counter windows) reach the collector.
TEST_F(GrpcTransportTest, CounterWindowsAndKernelFlopsReachTheCollector) {
  FakeCollector collector(socket());
  auto transport = Connect();
  const std::string fp32 = "tf32_dst_fp32", trigger = "daemon: control 3", set = "cheap";
  const fs_tensor_flops tensor{Str(fp32), 64.0};
  fs_kernel_flops flops{};
  flops.correlation_id = 12;
  flops.counted_step = 4;
  flops.flops.fp32 = 128.0;
  flops.flops.tensor = &tensor;
  flops.flops.num_tensor = 1;
  fs_counter_window window{};
  window.first_step = 4;
  window.last_step = 5;
  window.trigger = Str(trigger);
  window.metric_set = Str(set);
  window.kernels_counted = 1;
  fs_batch batch{};
  batch.kernel_flops = &flops;
  batch.num_kernel_flops = 1;
  batch.windows = &window;
  batch.num_windows = 1;
  transport->Submit(batch);
  ASSERT_TRUE(transport->Flush(kLongWaitMs));
  const std::vector<v1::Batch> committed = collector.committed();
  ASSERT_EQ(committed.size(), 1u);
  ASSERT_EQ(committed[0].kernel_flops_size(), 1);
  EXPECT_EQ(committed[0].kernel_flops(0).correlation_id(), 12u);
  EXPECT_EQ(committed[0].kernel_flops(0).counted_step(), 4);
  EXPECT_DOUBLE_EQ(committed[0].kernel_flops(0).flops().fp32(), 128.0);
  EXPECT_EQ(committed[0].kernel_flops(0).flops().tensor(0).source(), fp32);
  ASSERT_EQ(committed[0].windows_size(), 1);
  EXPECT_EQ(committed[0].windows(0).trigger(), trigger);
  EXPECT_EQ(committed[0].windows(0).last_step(), 5);
}

// `flopscope where`: a batch that holds nothing but a snapshot of open ranges (a hung process
// makes no records) is delivered, where a batch of losses alone is not queued; a batch whose
// records are dropped keeps its snapshot.
TEST_F(GrpcTransportTest, ASnapshotOfOpenRangesTravelsAloneAndOutlivesDroppedRecords) {
  FakeCollector collector(socket());
  auto transport = Connect();
  const fs_open_range modules[] = {{3, 1'764'000'000'000'000'000}, {4, 1'764'000'000'100'000'000}};
  const fs_open_range phases[] = {{1, 1'763'999'999'000'000'000}};
  fs_thread_open_ranges thread{};
  thread.thread_id = 77;
  thread.modules = modules;
  thread.num_modules = 2;
  thread.module_depth = 2;
  thread.phases = phases;
  thread.num_phases = 1;
  thread.phase_depth = 1;
  fs_batch batch{};
  batch.has_open_ranges = 1;
  batch.open_ranges_time_ns = 1'764'000'001'000'000'000;
  batch.open_threads = &thread;
  batch.num_open_threads = 1;
  transport->Submit(batch);
  ASSERT_TRUE(transport->Flush(kLongWaitMs));
  std::vector<v1::Batch> committed = collector.committed();
  ASSERT_EQ(committed.size(), 1u);
  ASSERT_TRUE(committed[0].has_open_ranges());
  const v1::OpenRanges& open = committed[0].open_ranges();
  EXPECT_EQ(open.time_ns(), batch.open_ranges_time_ns);
  ASSERT_EQ(open.threads_size(), 1);
  EXPECT_EQ(open.threads(0).thread_id(), 77u);
  ASSERT_EQ(open.threads(0).modules_size(), 2);
  EXPECT_EQ(open.threads(0).modules(1).path_id(), 4u);
  EXPECT_EQ(open.threads(0).modules(1).start_ns(), modules[1].start_ns);
  EXPECT_EQ(open.threads(0).module_depth(), 2u);
  ASSERT_EQ(open.threads(0).phases_size(), 1);
  EXPECT_EQ(open.threads(0).phases(0).path_id(), 1u);
  // Nothing open: a snapshot with no threads still travels.
  fs_batch nothing{};
  nothing.has_open_ranges = 1;
  nothing.open_ranges_time_ns = batch.open_ranges_time_ns + 1;
  transport->Submit(nothing);
  ASSERT_TRUE(transport->Flush(kLongWaitMs));
  committed = collector.committed();
  ASSERT_EQ(committed.size(), 2u);
  EXPECT_TRUE(committed[1].has_open_ranges());
  EXPECT_EQ(committed[1].open_ranges().threads_size(), 0);
  // Records dropped for want of room: the snapshot stays (it is not a record).
  v1::Batch encoded;
  TestBatch with_records(1, 1, 2);
  fs_batch both = with_records.view();
  both.has_open_ranges = 1;
  both.open_ranges_time_ns = batch.open_ranges_time_ns;
  both.open_threads = &thread;
  both.num_open_threads = 1;
  transport::EncodeBatch(both, 9, /*drop_records=*/true, {}, &encoded);
  EXPECT_EQ(encoded.ranges_size(), 0);
  EXPECT_EQ(encoded.open_ranges().threads_size(), 1);
}

TEST_F(GrpcTransportTest, WaitsForADaemonThatStartsLater) {
  auto transport = Connect();
  TestBatch a(1, 1, 2);
  transport->Submit(a.view());
  EXPECT_FALSE(transport->Flush(50));
  EXPECT_EQ(transport->Stats().connected, 0);
  EXPECT_GT(transport->Stats().bytes_pending, 0u);
  FakeCollector collector(socket());
  ASSERT_TRUE(transport->Flush(kLongWaitMs));
  EXPECT_EQ(Seqs(collector.committed()), (std::vector<uint64_t>{1}));
}

TEST_F(GrpcTransportTest, ResendsWhatWasNotAcknowledgedAfterAHangUp) {
  FakeCollector::Behaviour behaviour;
  behaviour.hang_up_at_seq = 2;
  FakeCollector collector(socket(), behaviour);
  auto transport = Connect();
  TestBatch a(1, 1, 1), b(2, 1, 1), c(3, 1, 1);
  transport->Submit(a.view());
  transport->Submit(b.view());
  transport->Submit(c.view());
  ASSERT_TRUE(transport->Flush(kLongWaitMs));
  EXPECT_EQ(Seqs(collector.committed()), (std::vector<uint64_t>{1, 2, 3}));
  const std::vector<uint64_t> received = Seqs(collector.received());
  EXPECT_EQ(std::count(received.begin(), received.end(), 2u), 2);  // sent, lost, resent
  EXPECT_EQ(collector.hellos().size(), 2u);
  EXPECT_EQ(transport->Stats().reconnects, 1u);
}

TEST_F(GrpcTransportTest, RejectedBatchIsDroppedCountedAndItsDefinitionsKept) {
  FakeCollector::Behaviour behaviour;
  behaviour.reject_seq = 2;
  FakeCollector collector(socket(), behaviour);
  auto transport = Connect();
  TestBatch a(1, 1, 1), bad(2, 1, 4), c(3, 1, 1);
  transport->Submit(a.view());
  transport->Submit(bad.view());
  transport->Submit(c.view());
  ASSERT_TRUE(transport->Flush(kLongWaitMs));
  const fs_transport_stats stats = transport->Stats();
  EXPECT_EQ(stats.batches_rejected, 1u);
  EXPECT_EQ(stats.records_dropped, 4u);
  const std::vector<v1::Batch> committed = collector.committed();
  ASSERT_EQ(Seqs(committed), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(committed[1].ranges_size(), 0);  // seq 2 came back with its definition only
  EXPECT_EQ(committed[1].paths_size(), 1);
  // Batches encoded after the rejection report it.
  TestBatch d(4, 0, 1);
  transport->Submit(d.view());
  ASSERT_TRUE(transport->Flush(kLongWaitMs));
  const v1::Batch last = collector.committed().back();
  ASSERT_EQ(last.losses_size(), 1);
  EXPECT_EQ(last.losses(0).cause(), v1::LOSS_CAUSE_REJECTED);
  EXPECT_EQ(last.losses(0).records(), 4u);
}

TEST_F(GrpcTransportTest, FullPendingQueueDropsRecordsButKeepsDefinitions) {
  auto transport = Connect(/*max_pending_bytes=*/1);
  TestBatch a(1, 1, 2), b(2, 1, 3, /*metadata=*/1);
  transport->Submit(a.view());  // an empty queue takes anything
  transport->Submit(b.view());  // over the bound
  EXPECT_EQ(transport->Stats().records_dropped, 3u);
  FakeCollector collector(socket());
  ASSERT_TRUE(transport->Flush(kLongWaitMs));
  const std::vector<v1::Batch> committed = collector.committed();
  ASSERT_EQ(committed.size(), 2u);
  EXPECT_EQ(committed[0].ranges_size(), 2);
  EXPECT_EQ(committed[1].ranges_size(), 0);
  EXPECT_EQ(committed[1].paths_size(), 1);
  EXPECT_EQ(committed[1].metadata_size(), 1);
  ASSERT_EQ(committed[1].losses_size(), 1);
  EXPECT_EQ(committed[1].losses(0).cause(), v1::LOSS_CAUSE_DAEMON_UNREACHABLE);
  EXPECT_EQ(committed[1].losses(0).records(), 3u);
}

TEST_F(GrpcTransportTest, ASnapshotAloneWithoutRoomIsNotQueued) {
  auto transport = Connect(/*max_pending_bytes=*/1);
  TestBatch a(1, 1, 2);
  transport->Submit(a.view());  // an empty queue takes anything
  fs_batch snapshot{};
  snapshot.has_open_ranges = 1;
  snapshot.open_ranges_time_ns = 1'764'000'001'000'000'000;
  transport->Submit(snapshot);  // over the bound, nothing but a snapshot: dropped
  EXPECT_EQ(transport->Stats().batches_submitted, 1u);
  EXPECT_EQ(transport->Stats().records_dropped, 0u) << "a snapshot is not a record";
  FakeCollector collector(socket());
  ASSERT_TRUE(transport->Flush(kLongWaitMs));
  const std::vector<v1::Batch> committed = collector.committed();
  ASSERT_EQ(committed.size(), 1u);
  EXPECT_FALSE(committed[0].has_open_ranges());
}

TEST_F(GrpcTransportTest, NoRoomWhileConnectedIsCountedAsABacklogNotAnAbsentDaemon) {
  FakeCollector::Behaviour behind;
  behind.ack = false;  // connected, but it never catches up
  FakeCollector collector(socket(), behind);
  auto transport = Connect(/*max_pending_bytes=*/1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (transport->Stats().connected == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(transport->Stats().connected, 1);
  TestBatch a(1, 1, 2), b(2, 1, 3);
  transport->Submit(a.view());  // an empty queue takes anything
  transport->Submit(b.view());  // over the bound, a still unacknowledged, the daemon connected
  EXPECT_EQ(transport->Stats().records_dropped, 3u);
  std::vector<v1::Batch> received;
  while (received.size() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    received = collector.received();
  }
  ASSERT_EQ(received.size(), 2u);
  EXPECT_EQ(received[1].ranges_size(), 0);
  ASSERT_EQ(received[1].losses_size(), 1);
  EXPECT_EQ(received[1].losses(0).cause(), v1::LOSS_CAUSE_BACKLOG_FULL);
  EXPECT_EQ(received[1].losses(0).records(), 3u);
}

TEST_F(GrpcTransportTest, OverTheMemoryBoundBatchesWaitInTheSpoolAndArriveWhole) {
  auto transport = Connect(/*max_pending_bytes=*/1, /*spool=*/true);
  TestBatch a(1, 1, 2), b(2, 1, 3), c(3, 1, 4);
  transport->Submit(a.view());  // an empty queue takes anything
  transport->Submit(b.view());  // over the bound: to disk
  transport->Submit(c.view(/*final=*/true));
  fs_transport_stats stats = transport->Stats();
  EXPECT_EQ(stats.records_dropped, 0u);
  EXPECT_EQ(stats.records_pending, 9u);
  EXPECT_EQ(stats.records_spooled, 7u);
  ASSERT_EQ(SpoolFiles().size(), 1u);
  FakeCollector collector(socket());
  ASSERT_TRUE(transport->Flush(kLongWaitMs));
  const std::vector<v1::Batch> committed = collector.committed();
  EXPECT_EQ(Seqs(committed), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(RangesIn(committed), 9u);
  EXPECT_TRUE(committed.back().final());
  stats = transport->Stats();
  EXPECT_EQ(stats.records_pending, 0u);
  EXPECT_EQ(stats.records_spooled, 0u);
  transport.reset();
  EXPECT_TRUE(SpoolFiles().empty());  // all acknowledged: nothing left for anyone
}

// What SIGKILL leaves: the spool file as it is while the process lives (a copy of it, since the
// live file is locked) holds every batch not acknowledged yet, memory-resident ones included.
TEST_F(GrpcTransportTest, EveryBatchIsWrittenAheadAndAcknowledgedOnesAreCutFromTheFile) {
  auto transport = Connect(/*max_pending_bytes=*/0, /*spool=*/true, "host-6-1");
  TestBatch a(1, 1, 2), b(2, 1, 3);
  transport->Submit(a.view());
  transport->Submit(b.view());
  EXPECT_EQ(transport->Stats().records_spooled, 0u);  // both in memory as well
  ASSERT_EQ(SpoolFiles().size(), 1u);
  const std::string live = SpoolFiles()[0];
  auto orphan_copy = [&](const std::string& name) {
    const std::string copy = dir_.path() + "/" + name;
    std::filesystem::copy_file(live, copy);
    std::string error;
    std::unique_ptr<SpoolFile> file = SpoolFile::OpenOrphan(copy, &error);
    EXPECT_NE(file, nullptr) << error;
    return file;
  };
  std::unique_ptr<SpoolFile> killed = orphan_copy("killed.spool");
  ASSERT_NE(killed, nullptr);
  EXPECT_EQ(killed->hello().hello().session_id(), "host-6-1");
  ASSERT_EQ(killed->entries().size(), 2u);
  EXPECT_EQ(killed->entries()[0].records + killed->entries()[1].records, 5u);

  FakeCollector collector(socket());
  ASSERT_TRUE(transport->Flush(kLongWaitMs));
  std::unique_ptr<SpoolFile> acked = orphan_copy("acked.spool");
  ASSERT_NE(acked, nullptr);
  EXPECT_TRUE(acked->entries().empty());  // cut back to the hello once all was acknowledged
  EXPECT_EQ(acked->bytes(), acked->empty_bytes());
  transport.reset();
  EXPECT_TRUE(SpoolFiles().empty());  // a clean end removes it
}

TEST(SpoolCompactionTest, CopiesNoMoreThanItFreesUnlessRoomRunsOut) {
  constexpr uint64_t kMiB = 1 << 20, kMax = 64 * kMiB, kHello = 100;
  const uint64_t at = GrpcTransport::kCompactAtBytes;
  // Small files are left alone: the queue emptying cuts them back.
  EXPECT_FALSE(GrpcTransport::ShouldCompact(at - 1, kHello, /*live=*/0, kMiB, kMax));
  // Past the threshold: only when the dead frames take at least as much as the live ones.
  EXPECT_TRUE(GrpcTransport::ShouldCompact(at, kHello, (at - kHello) / 2, kMiB, kMax));
  EXPECT_FALSE(GrpcTransport::ShouldCompact(at, kHello, (at - kHello) / 2 + 1, kMiB, kMax));
  // Nothing dead: nothing to gain.
  EXPECT_FALSE(GrpcTransport::ShouldCompact(at, kHello, at - kHello, kMiB, kMax));
  // The next frame does not fit: any dead frame is worth dropping, whatever the size.
  EXPECT_TRUE(GrpcTransport::ShouldCompact(kMiB, kHello, kMiB - kHello - 1, 1, kMiB));
  EXPECT_FALSE(GrpcTransport::ShouldCompact(kMiB, kHello, kMiB - kHello, 1, kMiB));
}

TEST_F(GrpcTransportTest, WithoutRoomInTheSpoolRecordsAreDroppedAndCountedOnce) {
  auto transport = Connect(/*max_pending_bytes=*/1, /*spool=*/true);
  TestBatch a(1, 1, 2), big(2, 1, 100000);  // megabytes encoded: over the 1 MiB spool
  transport->Submit(a.view());
  transport->Submit(big.view());
  const fs_transport_stats stats = transport->Stats();
  EXPECT_EQ(stats.records_dropped, 100000u);
  EXPECT_EQ(stats.dropped_unreachable, 100000u);
  EXPECT_EQ(stats.records_pending, 2u);  // a, and big's definition without its records
  EXPECT_EQ(stats.records_spooled, 0u);
}

TEST_F(GrpcTransportTest, WhatAFullSpoolCannotTakeAtExitIsCountedInItsLastBatch) {
  std::string path;
  {
    auto ended = Connect(/*max_pending_bytes=*/0, /*spool=*/true, "host-9-1");
    TestBatch a(1, 1, 2), big(2, 1, 100000);  // megabytes encoded: over the 1 MiB spool
    ended->Submit(a.view());
    ended->Submit(big.view(/*final=*/true));
    EXPECT_FALSE(ended->Flush(50));
    EXPECT_EQ(ended->SpoolPending(&path), 2u);  // a only
  }
  std::string error;
  std::unique_ptr<SpoolFile> file = SpoolFile::OpenOrphan(path, &error);
  ASSERT_NE(file, nullptr) << error;
  // a; big's definition alone under its own seq (later batches may use its path); the last.
  ASSERT_EQ(file->entries().size(), 3u);
  EXPECT_EQ(file->entries()[0].seq, 1u);
  v1::UpMessage definitions;
  ASSERT_TRUE(file->Read(file->entries()[1], &definitions));
  EXPECT_EQ(definitions.batch().seq(), 2u);
  EXPECT_EQ(definitions.batch().paths_size(), 1);
  EXPECT_EQ(definitions.batch().ranges_size(), 0);
  v1::UpMessage last;
  ASSERT_TRUE(file->Read(file->entries()[2], &last));
  EXPECT_EQ(last.batch().seq(), 3u);  // after big's, which is lost
  EXPECT_TRUE(last.batch().final());
  EXPECT_EQ(last.batch().ranges_size(), 0);
  uint64_t undelivered = 0;
  for (const v1::LossCounter& loss : last.batch().losses()) {
    if (loss.cause() == v1::LOSS_CAUSE_EXIT_UNDELIVERED) undelivered = loss.records();
  }
  EXPECT_EQ(undelivered, 100000u);
}

// The orphan is gone once replayed; the one spool file left is the live transport's own, made at
// its start with its hello.
bool OnlyItsOwnSpoolIsLeft(const std::vector<std::string>& files, const std::string& orphan) {
  return files.size() == 1 && files[0] != orphan;
}

TEST_F(GrpcTransportTest, AnOrphanedSpoolIsDeliveredByTheNextProcessOnce) {
  {
    auto ended = Connect(/*max_pending_bytes=*/0, /*spool=*/true, "host-7-1");
    TestBatch a(1, 1, 2), b(2, 1, 3);
    ended->Submit(a.view());
    ended->Submit(b.view(/*final=*/true));
    EXPECT_FALSE(ended->Flush(50));
    std::string path;
    EXPECT_EQ(ended->SpoolPending(&path), 5u);
    EXPECT_EQ(ended->Stats().records_spooled, 5u);
    EXPECT_EQ(SpoolFiles(), (std::vector<std::string>{path}));
  }
  const std::vector<std::string> left = SpoolFiles();
  ASSERT_EQ(left.size(), 1u);  // kept: unacknowledged
  const std::string copy = dir_.path() + "/copy";
  std::filesystem::copy_file(left[0], copy);

  FakeCollector collector(socket());
  auto next = Connect(/*max_pending_bytes=*/0, /*spool=*/true, "host-8-1");
  for (int i = 0; i < 2000 && next->Stats().orphans_replayed == 0; ++i) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  ASSERT_EQ(next->Stats().orphans_replayed, 1u);
  EXPECT_TRUE(OnlyItsOwnSpoolIsLeft(SpoolFiles(), left[0])) << SpoolFiles().size();
  std::vector<std::string> sessions;
  for (const auto& hello : collector.hellos()) sessions.push_back(hello.session_id());
  EXPECT_EQ(std::count(sessions.begin(), sessions.end(), "host-7-1"), 1);  // as the ended one
  EXPECT_EQ(Seqs(collector.committed()), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(RangesIn(collector.committed()), 5u);
  EXPECT_TRUE(collector.committed().back().final());
  next.reset();

  // The same spool once more (a replay cut off after the daemon committed it): the Welcome says
  // what is committed, and nothing is sent twice.
  std::filesystem::copy_file(copy, left[0]);
  const size_t received = collector.received().size();
  auto again = Connect(/*max_pending_bytes=*/0, /*spool=*/true, "host-8-2");
  for (int i = 0; i < 2000 && again->Stats().orphans_replayed == 0; ++i) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  EXPECT_EQ(again->Stats().orphans_replayed, 1u);
  EXPECT_EQ(collector.received().size(), received);
  EXPECT_EQ(RangesIn(collector.committed()), 5u);
  EXPECT_TRUE(OnlyItsOwnSpoolIsLeft(SpoolFiles(), left[0])) << SpoolFiles().size();
}

TEST_F(GrpcTransportTest, AnUnusableSpoolDirectoryLeavesTheTransportWorkingWithoutIt) {
  ASSERT_EQ(mkdir(spool_dir().c_str(), 0777), 0);
  ASSERT_EQ(chmod(spool_dir().c_str(), 0777), 0);  // anyone could plant files here: not used
  target_ = "unix:" + socket();
  spool_dir_ = spool_dir();
  fs_transport_options options{};
  options.target = Str(target_);
  options.max_pending_bytes = 1;
  options.spool_dir = Str(spool_dir_);
  options.max_spool_bytes = 1 << 20;
  std::string warning;
  auto transport = GrpcTransport::Create(options, TestHello(), &warning);
  ASSERT_NE(transport, nullptr);
  EXPECT_NE(warning.find("no spool"), std::string::npos) << warning;
  TestBatch a(1, 1, 2), b(2, 1, 3);
  transport->Submit(a.view());
  transport->Submit(b.view());  // over the memory bound and no spool: dropped, counted
  EXPECT_EQ(transport->Stats().dropped_unreachable, 3u);
  EXPECT_TRUE(SpoolFiles().empty());
  FakeCollector collector(socket());
  ASSERT_TRUE(transport->Flush(kLongWaitMs));
  EXPECT_EQ(RangesIn(collector.committed()), 2u);
}

TEST_F(GrpcTransportTest, FlushGivesUpWithoutAcks) {
  FakeCollector::Behaviour behaviour;
  behaviour.ack = false;
  FakeCollector collector(socket(), behaviour);
  auto transport = Connect();
  TestBatch a(1, 1, 1);
  transport->Submit(a.view());
  EXPECT_FALSE(transport->Flush(100));
  EXPECT_EQ(transport->Stats().batches_acked, 0u);
}

TEST_F(GrpcTransportTest, ControlsArePolledAndAnswered) {
  FakeCollector collector(socket());
  auto transport = Connect();
  v1::Control control;
  control.set_id(9);
  control.mutable_counter_window()->set_steps(3);
  control.mutable_counter_window()->set_metric_set("flops");
  collector.QueueControl(control);
  TestBatch a(1, 1, 1);
  transport->Submit(a.view());  // the fake answers with queued controls when a message arrives
  ASSERT_TRUE(transport->Flush(kLongWaitMs));
  fs_control polled{};
  for (int i = 0; i < 1000 && !transport->PollControl(&polled); ++i) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  EXPECT_EQ(polled.id, 9u);
  EXPECT_EQ(polled.kind, 1u);
  EXPECT_EQ(polled.steps, 3u);
  EXPECT_STREQ(polled.metric_set, "flops");
  transport->ReplyControl(9, false, "not in this build");
  ASSERT_TRUE(collector.WaitForControlReplies(1, milliseconds(kLongWaitMs)));
  EXPECT_EQ(collector.control_replies()[0].id(), 9u);
  EXPECT_FALSE(collector.control_replies()[0].accepted());
  EXPECT_EQ(collector.control_replies()[0].message(), "not in this build");
}

TEST_F(GrpcTransportTest, DestroyStopsPromptlyWhileDisconnected) {
  auto transport = Connect();
  TestBatch a(1, 1, 1);
  transport->Submit(a.view());
  transport.reset();  // must not hang in backoff or connect
  SUCCEED();
}

}  // namespace
}  // namespace flopscope::transport
