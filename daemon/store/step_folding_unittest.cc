// Folding old steps (step_folding.h, range_fold_codec.h): every report figure, `report --steps`
// medians included, must come out the same from a folded file as from the raw file it was folded
// from. Both files get the same batches; only one is folded; the reports are compared whole.
#include "daemon/store/step_folding.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/sqlite/sqlite_db.h"
#include "daemon/query/range_row_cache.h"
#include "daemon/query/rank_reader.h"
#include "daemon/report/report_builder.h"
#include "daemon/store/range_fold_codec.h"
#include "daemon/store/rank_store.h"
#include "daemon/testing/test_batches.h"
#include "daemon/testing/test_temp_dir.h"
#include "google/protobuf/util/message_differencer.h"

namespace flopscope::daemon {
namespace {

constexpr int kSteps = 12;
constexpr int64_t kStepNs = 100'000;
constexpr int kCountedFirst = 3;  // steps 3..4 ran in a counter window
constexpr int kCountedLast = 4;

// Paths: step > forward > model > {attn, mlp}; step > backward > grad.
enum : uint64_t { kStep = 1, kForward, kBackward, kModel, kAttn, kMlp, kGrad };

v1::Batch Definitions() {
  v1::Batch batch;
  fixtures::AddPath(batch, kStep, 0, "step", "flopscope");
  fixtures::AddPath(batch, kForward, kStep, "forward", "flopscope");
  fixtures::AddPath(batch, kBackward, kStep, "backward", "flopscope");
  fixtures::AddPath(batch, kModel, kForward, "model");
  fixtures::AddPath(batch, kAttn, kModel, "attn");
  fixtures::AddPath(batch, kMlp, kModel, "mlp");
  fixtures::AddPath(batch, kGrad, kBackward, "grad");
  fixtures::AddString(batch, 1, "_Z9attentionPf");
  fixtures::AddString(batch, 2, "_Z4gemmPfS_i");
  return batch;
}

// One step's records: ranges in pop order (children first), each module's kernels inside it,
// durations that vary from step to step so that medians differ from means.
class StepWriter {
 public:
  StepWriter(int step, v1::Batch* batch)
      : step_(step),
        t_(step * kStepNs),
        counted_(step >= kCountedFirst && step <= kCountedLast),
        batch_(batch) {}

  void Write() {
    const int64_t wobble = (step_ * 37 % 11) * 100;
    Range(kAttn, 2'000, 10'000 + wobble, 1, 2);
    Range(kMlp, 15'000, 20'000 - wobble, 2, 3);
    Range(kModel, 1'000, 38'000);
    Range(kForward, 500, 40'000);
    Range(kGrad, 45'000, 30'000 + 2 * wobble, 2, 4);
    Range(kBackward, 44'000, 46'000);
    Range(kStep, 0, 95'000);
    v1::KernelRecord* copy = fixtures::AddKernel(*batch_, kMlp, 0, t_ + 90'000, 300 + wobble);
    copy->set_kind(v1::ACTIVITY_KIND_MEMCPY);
    copy->set_bytes(4096);
    copy->set_counted(counted_);
  }

 private:
  // The path's occurrence in this step.
  uint64_t Instance(uint64_t path) const { return 100 * uint64_t(step_ + 1) + path; }
  uint64_t Parent(uint64_t path) const {
    switch (path) {
      case kAttn:
      case kMlp:
        return Instance(kModel);
      case kModel:
        return Instance(kForward);
      case kGrad:
        return Instance(kBackward);
      case kForward:
      case kBackward:
        return Instance(kStep);
      default:
        return 0;
    }
  }

  // A range of `path` and, with `kernels`, its kernels of name `name`, 1 us apart.
  void Range(uint64_t path, int64_t start, int64_t duration, uint32_t name = 0, int kernels = 0) {
    for (int k = 0; k < kernels; ++k) {
      v1::KernelRecord* kernel = fixtures::AddKernel(*batch_, path, name, t_ + start + k * 1'000,
                                                     400 + (step_ * 13 + k * 7) % 9 * 50);
      kernel->set_range_instance_id(Instance(path));
      kernel->set_counted(counted_);
    }
    v1::RangeEvent* range = fixtures::AddRange(*batch_, path, t_ + start, duration);
    range->set_instance_id(Instance(path));
    range->set_parent_instance_id(Parent(path));
    range->set_counted(counted_);
  }

  const int step_;
  const int64_t t_;
  const bool counted_;
  v1::Batch* batch_;
};

// Two rank files fed the same batches; one store folds (policy), the other keeps everything.
class StepFoldingTest : public ::testing::Test {
 protected:
  void Fill(const FoldPolicy& policy) {
    for (const auto& [name, fold] : {std::pair{"raw", FoldPolicy{}}, std::pair{"folded", policy}}) {
      absl::StatusOr<std::unique_ptr<RankStore>> store = RankStore::Open(dir_.File(name), fold);
      ASSERT_TRUE(store.ok()) << store.status();
      absl::StatusOr<SessionHandle> session =
          (*store)->OpenSession(fixtures::Hello("job-f", 0, "node-1-1-1"));
      ASSERT_TRUE(session.ok()) << session.status();
      for (int step = 0; step < steps_; ++step) {
        v1::Batch batch = step == 0 ? Definitions() : v1::Batch();
        StepWriter(step, &batch).Write();
        if (step == kCountedLast + 1) {
          fixtures::AddWindow(batch, kCountedFirst, kCountedLast, kCountedFirst * kStepNs,
                              2 * kStepNs);
        }
        batch.set_seq(static_cast<uint64_t>(step) + 1);
        const absl::Status status = (*store)->Commit(session->sid, batch);
        ASSERT_TRUE(status.ok()) << status;
      }
    }
  }

  // The report of one file, read whole, or through `cached` (range_row_cache.h) when given.
  v1::Report Report(const std::string& name, std::optional<StepWindowRequest> window,
                    RangeRows* cached = nullptr) {
    RankReadOptions options;
    options.kernel_groups = true;
    options.step_window = window;
    absl::StatusOr<RankSnapshot> snapshot = absl::UnknownError("not read");
    if (cached == nullptr) {
      snapshot = RankReader::Read(dir_.File(name), options);
    } else {
      absl::StatusOr<std::unique_ptr<SqliteDb>> db = RankReader::Open(dir_.File(name));
      EXPECT_TRUE(db.ok()) << db.status();
      if (db.ok()) snapshot = RankReader::Read(**db, options, cached);
    }
    EXPECT_TRUE(snapshot.ok()) << snapshot.status();
    ReportBuilder builder("job-f");
    builder.ListTopKernels("/", 100);
    v1::RankInfo rank;
    rank.set_gpu_status("CUDA was not initialised in this process");
    builder.AddRank(rank, snapshot.ok() ? *snapshot : RankSnapshot{});
    return builder.Build();
  }

  int64_t Count(const std::string& name, const std::string& sql) {
    absl::StatusOr<std::unique_ptr<SqliteDb>> db = RankReader::Open(dir_.File(name));
    EXPECT_TRUE(db.ok()) << db.status();
    int64_t value = -1;
    EXPECT_TRUE((*db)
                    ->ForEachRow(sql,
                                 [&](const SqliteStatement& row) {
                                   value = row.ColumnInt(0);
                                   return absl::OkStatus();
                                 })
                    .ok());
    return value;
  }

  // The figures the comparison is about are there: per-step latencies of the modules over the
  // window's uncounted steps (12 steps, 3..4 counted) and their kernels.
  void ExpectStepFigures(const v1::Report& report) {
    const v1::ModuleStats* attn = nullptr;
    for (const v1::ModuleStats& module : report.modules()) {
      if (module.name() == "attn") attn = &module;
    }
    ASSERT_NE(attn, nullptr);
    EXPECT_EQ(attn->step_latency().samples(),
              uint32_t(steps_ - (kCountedLast - kCountedFirst + 1)));
    EXPECT_TRUE(attn->step_latency().gpu());
    EXPECT_EQ(attn->fwd_step_latency().samples(), attn->step_latency().samples());
    EXPECT_EQ(attn->kernels(), uint64_t(2 * (steps_ - (kCountedLast - kCountedFirst + 1))));
  }

  void ExpectSameReports() {
    ExpectStepFigures(Report("folded", StepWindowRequest{0, std::nullopt}));
    const std::vector<std::optional<StepWindowRequest>> windows = {
        std::nullopt, StepWindowRequest{0, std::nullopt}, StepWindowRequest{1, 6},
        StepWindowRequest{8, 11}};
    for (const std::optional<StepWindowRequest>& window : windows) {
      const v1::Report raw = Report("raw", window);
      const v1::Report folded = Report("folded", window);
      std::string differences;
      google::protobuf::util::MessageDifferencer differ;
      differ.ReportDifferencesToString(&differences);
      EXPECT_TRUE(differ.Compare(raw, folded))
          << "window " << (window ? window->first : -1) << ":\n"
          << differences;
    }
  }

  fixtures::ScopedTempDir dir_;
  int steps_ = kSteps;
};

TEST_F(StepFoldingTest, FoldedStepsGiveTheSameReportAsRawOnes) {
  Fill(FoldPolicy{/*keep_raw_steps=*/3, /*check_every_records=*/1});
  // Something was folded: the raw file keeps every row, the folded one only recent ones.
  const int64_t raw_kernels = Count("raw", "SELECT COUNT(*) FROM kernels");
  const int64_t folded_kernels = Count("folded", "SELECT COUNT(*) FROM kernels");
  EXPECT_LT(folded_kernels, raw_kernels);
  EXPECT_EQ(Count("folded", "SELECT COUNT(*) FROM kernels") +
                Count("folded", "SELECT COALESCE(SUM(count), 0) FROM kernel_folds"),
            raw_kernels);
  EXPECT_LT(Count("folded", "SELECT COUNT(*) FROM range_events"),
            Count("raw", "SELECT COUNT(*) FROM range_events"));
  EXPECT_GT(Count("folded", "SELECT COUNT(*) FROM range_folds"), 0);
  // The counter window's kernels stay raw.
  EXPECT_EQ(Count("folded", "SELECT COUNT(*) FROM kernels WHERE counted = 1"),
            Count("raw", "SELECT COUNT(*) FROM kernels WHERE counted = 1"));
  ExpectSameReports();

  // The folds carry what the raw tables lost: without them the reports differ.
  Count("folded", "DELETE FROM range_folds RETURNING 0");
  const StepWindowRequest all{0, std::nullopt};
  EXPECT_FALSE(google::protobuf::util::MessageDifferencer::Equals(Report("raw", all),
                                                                  Report("folded", all)));
}

TEST_F(StepFoldingTest, FoldingEverythingButOneStepStillGivesTheSameReport) {
  Fill(FoldPolicy{/*keep_raw_steps=*/1, /*check_every_records=*/1});
  // The raw range events are the newest steps only: at most two steps' worth.
  EXPECT_LE(Count("folded", "SELECT COUNT(*) FROM range_events"),
            2 * Count("raw", "SELECT COUNT(*) FROM range_events") / kSteps);
  ExpectSameReports();
}

TEST_F(StepFoldingTest, TooFewStepsFoldNothing) {
  Fill(FoldPolicy{/*keep_raw_steps=*/kSteps, /*check_every_records=*/1});
  EXPECT_EQ(Count("folded", "SELECT COUNT(*) FROM kernels"),
            Count("raw", "SELECT COUNT(*) FROM kernels"));
  EXPECT_EQ(Count("folded", "SELECT COUNT(*) FROM range_folds"), 0);
}

TEST_F(StepFoldingTest, AFoldTakesAtMostItsShareOfStepsAndTheNextOneGoesOn) {
  steps_ = static_cast<int>(kMaxStepsPerFold) + 10;
  Fill(FoldPolicy{});  // nothing folded while filling
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = RankReader::Open(dir_.File("folded"));
  ASSERT_TRUE(db.ok()) << db.status();
  const FoldPolicy keep_one{/*keep_raw_steps=*/1};
  absl::StatusOr<FoldOutcome> first = StepFolder::Fold(**db, keep_one);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->more);
  EXPECT_EQ(first->horizon_ns, fixtures::BaseNs() + kMaxStepsPerFold * kStepNs);
  absl::StatusOr<FoldOutcome> second = StepFolder::Fold(**db, keep_one);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(second->more);
  EXPECT_EQ(second->horizon_ns, fixtures::BaseNs() + (steps_ - 2) * kStepNs);
  db->reset();
  ExpectSameReports();
}

// The range events a report keeps between reads (range_row_cache.h): after every commit, a
// report read through the kept rows equals one read whole, on a file that folds every few steps
// (the rows are read again) and on one that never folds (only the new rows are read), with
// kernels of a step that arrive a step late (instance_stats changes under rows already kept).
TEST_F(StepFoldingTest, KeptRangeEventsGiveTheSameReportAsAWholeReadAfterEveryCommit) {
  struct File {
    const char* name;
    FoldPolicy policy;
    std::unique_ptr<RankStore> store;
    int64_t sid = 0;
    RangeRows cached;
  };
  std::vector<File> files(2);
  files[0].name = "raw";
  files[1].name = "folded";
  files[1].policy = FoldPolicy{/*keep_raw_steps=*/3, /*check_every_records=*/1};
  for (File& file : files) {
    absl::StatusOr<std::unique_ptr<RankStore>> store =
        RankStore::Open(dir_.File(file.name), file.policy);
    ASSERT_TRUE(store.ok()) << store.status();
    file.store = *std::move(store);
    absl::StatusOr<SessionHandle> session =
        file.store->OpenSession(fixtures::Hello("job-f", 0, "node-1-1-1"));
    ASSERT_TRUE(session.ok()) << session.status();
    file.sid = session->sid;
  }
  const std::vector<std::optional<StepWindowRequest>> windows = {
      std::nullopt, StepWindowRequest{1, std::nullopt}, StepWindowRequest{2, 5}};
  uint64_t seq = 0;
  for (int step = 0; step < kSteps; ++step) {
    v1::Batch batch = step == 0 ? Definitions() : v1::Batch();
    StepWriter(step, &batch).Write();
    if (step > 0) {
      // A kernel of the previous step's attn, arriving late.
      v1::KernelRecord* late = fixtures::AddKernel(batch, kAttn, 1, step * kStepNs - 3'000, 700);
      late->set_range_instance_id(100 * uint64_t(step) + kAttn);
    }
    batch.set_seq(++seq);
    for (File& file : files) {
      ASSERT_TRUE(file.store->Commit(file.sid, batch).ok());
      for (const std::optional<StepWindowRequest>& window : windows) {
        std::string differences;
        google::protobuf::util::MessageDifferencer differ;
        differ.ReportDifferencesToString(&differences);
        EXPECT_TRUE(
            differ.Compare(Report(file.name, window), Report(file.name, window, &file.cached)))
            << file.name << " after step " << step << ", window " << (window ? window->first : -1)
            << ":\n"
            << differences;
      }
    }
  }
  // The raw file's rows were only ever added to; the folded one's were read again after folds.
  EXPECT_EQ(files[0].cached.folded_rows, 0u);
  EXPECT_GT(files[1].cached.folded_rows, 0u);
  EXPECT_EQ(static_cast<int64_t>(files[0].cached.size()),
            Count("raw", "SELECT COUNT(*) FROM range_events"));
}

// Another file put in the path's place (same rowids, other events) is read again, not appended to.
TEST_F(StepFoldingTest, KeptRangeEventsOfAReplacedFileAreReadAgain) {
  Fill(FoldPolicy{/*keep_raw_steps=*/3, /*check_every_records=*/1});
  RangeRows cached;
  const StepWindowRequest all{0, std::nullopt};
  const v1::Report raw = Report("raw", all, &cached);
  ASSERT_EQ(cached.folded_rows, 0u);
  ASSERT_EQ(std::rename(dir_.File("folded").c_str(), dir_.File("raw").c_str()), 0);
  std::string differences;
  google::protobuf::util::MessageDifferencer differ;
  differ.ReportDifferencesToString(&differences);
  EXPECT_TRUE(differ.Compare(Report("raw", all), Report("raw", all, &cached))) << differences;
  EXPECT_GT(cached.folded_rows, 0u);
}

// An event whose parent is 2^32 or more below it does not pack (PackedRange): the cache keeps
// nothing of that file, and its report, read from the file, is the same as ever.
TEST_F(StepFoldingTest, KeptRangeEventsOfAFileThatDoesNotPackAreReadFromTheFile) {
  Fill(FoldPolicy{/*keep_raw_steps=*/3, /*check_every_records=*/1});
  {
    absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::OpenExisting(dir_.File("raw"));
    ASSERT_TRUE(db.ok()) << db.status();
    ASSERT_TRUE((*db)
                    ->Exec("UPDATE range_events SET instance_id = instance_id + (1 << 33) "
                           "WHERE rowid = (SELECT MAX(rowid) FROM range_events "
                           "WHERE parent_instance_id > 0)")
                    .ok());
  }
  RangeRows cached;
  const StepWindowRequest all{0, std::nullopt};
  std::string differences;
  google::protobuf::util::MessageDifferencer differ;
  differ.ReportDifferencesToString(&differences);
  EXPECT_TRUE(differ.Compare(Report("raw", all), Report("raw", all, &cached))) << differences;
  EXPECT_FALSE(cached.packed());
  EXPECT_EQ(cached.size(), 0u);
  EXPECT_EQ(cached.bytes(), 0u);  // nothing of the file is kept
}

// Every value a packed row can hold comes back as it was added; the others are refused.
TEST(RangeRowsTest, RowsComeBackAsAddedOrAreRefused) {
  constexpr uint64_t kMaxId = std::numeric_limits<uint64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const std::vector<RangeRow> rows = {
      {1, 7, 0, 3, kMin, kMax, 0, false},
      {-5, kMaxId, kMaxId - std::numeric_limits<uint32_t>::max(), kMaxId, kMax, kMin, 3, true},
      {kMax, 2, 1, 3, 10, 20, v1::RANGE_KIND_PUSH_POP, true},
      {kMin, 9, 8, 0, 0, 0, v1::RANGE_KIND_START_END, false},
  };
  RangeRows kept;
  // More rows than a block, so that the blocks' seams are crossed.
  const size_t n = 2 * RangeRows::kBlockRows + 3;
  for (size_t i = 0; i < n; ++i) ASSERT_TRUE(kept.Add(rows[i % rows.size()])) << i;
  ASSERT_EQ(kept.size(), n);
  size_t i = 0;
  kept.ForEach([&](const RangeRow& row) {
    const RangeRow& want = rows[i % rows.size()];
    EXPECT_EQ(row.sid, want.sid) << i;
    EXPECT_EQ(row.instance_id, want.instance_id) << i;
    EXPECT_EQ(row.parent_instance_id, want.parent_instance_id) << i;
    EXPECT_EQ(row.path_id, want.path_id) << i;
    EXPECT_EQ(row.start_ns, want.start_ns) << i;
    EXPECT_EQ(row.end_ns, want.end_ns) << i;
    EXPECT_EQ(row.kind, want.kind) << i;
    EXPECT_EQ(row.counted, want.counted) << i;
    ++i;
  });
  EXPECT_EQ(i, n);
  // 32 bytes a row, in whole blocks, and a little for the four (sid, path_id) pairs.
  const size_t blocks = (n + RangeRows::kBlockRows - 1) / RangeRows::kBlockRows;
  EXPECT_GE(kept.bytes(), blocks * RangeRows::kBlockRows * sizeof(PackedRange));
  EXPECT_LE(kept.bytes(), blocks * RangeRows::kBlockRows * sizeof(PackedRange) + 1024);

  const uint64_t far = uint64_t{1} << 32;  // the parent's distance does not fit 32 bits
  EXPECT_FALSE(kept.Add({1, far + 1, 1, 3, 0, 0, 1, false}));
  EXPECT_FALSE(kept.Add({1, 5, 5, 3, 0, 0, 1, false}));  // a parent not below the event
  EXPECT_FALSE(kept.Add({1, 5, 0, 3, 0, 0, 4, false}));  // a kind past 2 bits
  EXPECT_FALSE(kept.Add({1, 5, 0, 3, 0, 0, -1, false}));
  EXPECT_EQ(kept.size(), n);
}

TEST(RangeRowCacheTest, AFileWhoseRowsDoNotFitIsReadFromTheFileAndNoOtherIsEvicted) {
  // What one file of 60 rows holds (a whole block): the budget has room for one such file.
  RangeRows sixty;
  for (int i = 0; i < 60; ++i) ASSERT_TRUE(sixty.Add({1, uint64_t(i) + 1, 0, 3, i, i + 1, 1}));
  const size_t one_file = sixty.bytes();
  RangeRowCache cache(/*budget_bytes=*/one_file + one_file / 2);
  auto fill = [](RangeRows* rows) {
    for (int i = 0; i < 60; ++i) ASSERT_TRUE(rows->Add({1, uint64_t(i) + 1, 0, 3, i, i + 1, 1}));
  };
  {
    RangeRowCache::Lease small = cache.Take("/data/job/rank-0.sqlite");
    ASSERT_TRUE(small);
    fill(small.rows());
  }
  EXPECT_EQ(cache.bytes(), one_file);
  {
    RangeRowCache::Lease big = cache.Take("/data/job/rank-1.sqlite");
    ASSERT_TRUE(big);
    fill(big.rows());  // two files in all: over the budget
  }
  EXPECT_EQ(cache.refused(), 1u);
  EXPECT_EQ(cache.bytes(), one_file);                   // rank 0 kept, rank 1 let go
  EXPECT_FALSE(cache.Take("/data/job/rank-1.sqlite"));  // read from SQLite for a while
  {
    RangeRowCache::Lease again = cache.Take("/data/job/rank-0.sqlite");
    ASSERT_TRUE(again);
    EXPECT_EQ(again.rows()->size(), 60u);
  }
  cache.DropUnder("/data/job");
  EXPECT_EQ(cache.bytes(), 0u);
  EXPECT_TRUE(cache.Take("/data/job/rank-0.sqlite"));
  EXPECT_FALSE(RangeRowCache(0).Take("/data/job/rank-0.sqlite"));  // --report-cache-mb 0
}

TEST(RangeFoldCodecTest, EveryValueRoundTrips) {
  std::vector<FoldedRange> events(3);
  events[0].sid = 1;
  events[0].path_id = 7;
  events[0].instance_id = std::numeric_limits<uint64_t>::max();
  events[0].parent_instance_id = 0;
  events[0].thread_id = 140'000'000'000'000;
  events[0].start_ns = std::numeric_limits<int64_t>::max();
  events[0].end_ns = std::numeric_limits<int64_t>::min();
  events[0].kind = 2;
  events[0].counted = true;
  events[1] = events[0];
  events[1].has_stats = true;
  events[1].stats = InstanceActivity{9, 3, -5, std::numeric_limits<int64_t>::max(), -1};
  events[2].sid = 2;
  events[2].start_ns = 123;
  events[2].end_ns = 456;
  const std::string data = EncodeRangeFold(events);
  std::vector<FoldedRange> decoded;
  ASSERT_TRUE(DecodeRangeFold(data, [&](const FoldedRange& e) { decoded.push_back(e); }).ok());
  ASSERT_EQ(decoded.size(), events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    const FoldedRange& a = events[i];
    const FoldedRange& b = decoded[i];
    EXPECT_EQ(a.sid, b.sid);
    EXPECT_EQ(a.path_id, b.path_id);
    EXPECT_EQ(a.instance_id, b.instance_id);
    EXPECT_EQ(a.parent_instance_id, b.parent_instance_id);
    EXPECT_EQ(a.thread_id, b.thread_id);
    EXPECT_EQ(a.start_ns, b.start_ns);
    EXPECT_EQ(a.end_ns, b.end_ns);
    EXPECT_EQ(a.kind, b.kind);
    EXPECT_EQ(a.counted, b.counted);
    EXPECT_EQ(a.has_stats, b.has_stats);
    EXPECT_EQ(a.stats.path_id, b.stats.path_id);
    EXPECT_EQ(a.stats.kernels, b.stats.kernels);
    EXPECT_EQ(a.stats.first_start_ns, b.stats.first_start_ns);
    EXPECT_EQ(a.stats.last_end_ns, b.stats.last_end_ns);
    EXPECT_EQ(a.stats.busy_ns, b.stats.busy_ns);
  }
}

TEST(RangeFoldCodecTest, DamagedBytesAreRefused) {
  std::vector<FoldedRange> events(2);
  events[1].start_ns = 1'000'000;
  const std::string data = EncodeRangeFold(events);
  const auto ignore = [](const FoldedRange&) {};
  for (size_t cut = 0; cut < data.size(); ++cut) {
    EXPECT_FALSE(DecodeRangeFold(data.substr(0, cut), ignore).ok()) << "cut at " << cut;
  }
  EXPECT_FALSE(DecodeRangeFold(data + "x", ignore).ok());
  std::string other_format = data;
  other_format[0] = 2;
  EXPECT_FALSE(DecodeRangeFold(other_format, ignore).ok());
}

}  // namespace
}  // namespace flopscope::daemon
