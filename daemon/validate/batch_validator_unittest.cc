#include "daemon/validate/batch_validator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/testing/test_batches.h"

namespace flopscope::daemon {
namespace {

using fixtures::AddKernel;
using fixtures::AddKernelFlops;
using fixtures::AddMetadata;
using fixtures::AddPath;
using fixtures::AddRange;
using fixtures::AddString;
using fixtures::AddWindow;
using fixtures::BaseNs;
using ::testing::HasSubstr;

class BatchValidatorTest : public ::testing::Test {
 protected:
  BatchValidatorTest() { batch_.set_seq(7); }

  // Validates batch_ against known_; on success `added_` holds the new definitions.
  absl::Status Validate() {
    return BatchValidator(known_, absl::Now(), session_start_ns_).Validate(batch_, &added_);
  }

  // Expects INVALID_ARGUMENT whose message holds every fragment.
  void ExpectRejected(std::initializer_list<const char*> fragments) {
    absl::Status status = Validate();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    for (const char* fragment : fragments) EXPECT_THAT(status.message(), HasSubstr(fragment));
    // Every rejection names its rule: the record list the message points at ("kernels[3]: ..."),
    // else seq or limits for the batch as a whole.
    const std::string rule = RejectedRule(status);
    const std::string message(status.message());
    const size_t bracket = message.find('[');
    if (bracket != std::string::npos) {
      const size_t start = message.find(": ") + 2;
      EXPECT_EQ(rule, message.substr(start, bracket - start)) << message;
    } else {
      EXPECT_TRUE(rule == "seq" || rule == "limits") << rule << " for " << message;
    }
  }

  // Defines path 1 "model" and string 1 "gemm" as if an earlier batch had.
  void KnowModelAndGemm() {
    known_.AddPath(1, 0, 0, "", "model");
    known_.AddString(1, "gemm");
  }

  v1::Batch batch_;
  int64_t session_start_ns_ = 0;  // the hello's start_time_ns; 0: none given
  SessionDefinitions known_;
  SessionDefinitions added_;
};

TEST_F(BatchValidatorTest, AcceptsAWellFormedBatchAndReportsNewDefinitions) {
  AddString(batch_, 1, "void gemm<float>(float*)");
  AddPath(batch_, 1, 0, "model");
  AddPath(batch_, 2, 1, "layer.0");
  AddPath(batch_, 3, 0, "step", "flopscope");
  AddRange(batch_, 2, 0, 100);
  AddKernel(batch_, 2, 1, 10, 20);
  AddKernel(batch_, 0, 1, 40, 5);  // root: no range open at launch
  AddMetadata(batch_, "batch_size", "32");
  fixtures::AddLoss(batch_, v1::LOSS_CAUSE_BUFFER_FULL, 3);
  ASSERT_TRUE(Validate().ok()) << Validate();
  EXPECT_EQ(added_.path_count(), 3u);
  EXPECT_EQ(added_.string_count(), 1u);
  ASSERT_NE(added_.FindPath(2), nullptr);
  EXPECT_EQ(added_.FindPath(2)->depth, 2u);
  EXPECT_EQ(added_.FindPath(2)->parent_id, 1u);
}

TEST(RejectedRuleTest, OnlyTheValidatorsStatusesNameARule) {
  EXPECT_EQ(RejectedRule(absl::InvalidArgumentError("batch seq 1: ranges[0]: made up")), "other");
  EXPECT_EQ(RejectedRule(absl::OkStatus()), "other");
}

TEST(BatchRecordCountTest, CountsEveryKindOfRecord) {
  v1::Batch batch;
  batch.add_strings();
  batch.add_paths();
  batch.add_ranges();
  batch.add_ranges();
  batch.add_kernels();
  batch.add_metadata();
  batch.add_losses();
  batch.add_kernel_flops();
  batch.add_windows();
  EXPECT_EQ(BatchRecordCount(batch), 9u);
}

TEST_F(BatchValidatorTest, SeqMustBePositive) {
  batch_.set_seq(0);
  ExpectRejected({"batch seq 0", "seq must be > 0"});
}

TEST_F(BatchValidatorTest, SeqMustFitTheStoresSignedIntegers) {
  batch_.set_seq(kMaxSeq);
  EXPECT_TRUE(Validate().ok());
  batch_.set_seq(kMaxSeq + 1);
  ExpectRejected({"seq must be at most"});
  batch_.set_seq(std::numeric_limits<uint64_t>::max());  // stored as -1 before the rule
  ExpectRejected({"batch seq 18446744073709551615", "seq must be at most"});
  EXPECT_EQ(RejectedRule(Validate()), "seq");
}

TEST_F(BatchValidatorTest, RejectsMoreThanAMillionRecords) {
  for (size_t i = 0; i <= kMaxRecordsPerBatch; ++i) batch_.add_losses();
  ExpectRejected({"batch seq 7", "1000001 records", "at most 1000000"});
}

TEST_F(BatchValidatorTest, RejectsASessionDefiningTooManyStrings) {
  for (uint32_t id = 1; id <= kMaxStringsPerSession; ++id) known_.AddString(id, "k");
  AddString(batch_, kMaxStringsPerSession + 1, "one too many");
  ExpectRejected({"more than", "strings"});
}

TEST_F(BatchValidatorTest, StringRules) {
  AddString(batch_, 0, "zero");
  ExpectRejected({"strings[0]", "id must be > 0"});

  batch_.clear_strings();
  AddString(batch_, 1, std::string(kMaxStringDefBytes + 1, 'k'));
  ExpectRejected({"strings[0]", "65537 bytes long"});

  batch_.clear_strings();
  AddString(batch_, 1, std::string("a\0b", 3));
  ExpectRejected({"strings[0]", "NUL"});

  batch_.clear_strings();
  AddString(batch_, 1, "ok");
  AddString(batch_, 2, "\xff\xfe");
  ExpectRejected({"strings[1]", "UTF-8"});
}

TEST_F(BatchValidatorTest, StringRedefinitionMustMatch) {
  KnowModelAndGemm();
  AddString(batch_, 1, "gemm");  // same value again: fine, nothing new
  ASSERT_TRUE(Validate().ok());
  EXPECT_EQ(added_.string_count(), 0u);

  AddString(batch_, 1, "conv");
  ExpectRejected({"strings[1]", "redefines string 1"});

  batch_.clear_strings();
  AddString(batch_, 2, "a");
  AddString(batch_, 2, "b");  // within one batch too
  ExpectRejected({"strings[1]", "redefines string 2"});
}

TEST_F(BatchValidatorTest, PathIdsAndNames) {
  AddPath(batch_, 0, 0, "root?");
  ExpectRejected({"paths[0]", "id must be > 0"});

  batch_.clear_paths();
  AddPath(batch_, 1, 0, "");
  ExpectRejected({"paths[0]", "name is empty"});

  batch_.clear_paths();
  AddPath(batch_, 1, 0, std::string(kMaxNameBytes + 1, 'n'));
  ExpectRejected({"paths[0]", "name is 4097 bytes long"});

  batch_.clear_paths();
  AddPath(batch_, 1, 0, std::string("la\0yer", 6));
  ExpectRejected({"paths[0]", "name holds a NUL byte"});

  batch_.clear_paths();
  AddPath(batch_, 1, 0, "layer", "\xc0\xaf");  // overlong '/'
  ExpectRejected({"paths[0]", "domain is not valid UTF-8"});
}

TEST_F(BatchValidatorTest, ParentMustBeDefinedFirst) {
  AddPath(batch_, 2, 1, "child");  // parent defined only afterwards
  AddPath(batch_, 1, 0, "parent");
  ExpectRejected({"paths[0]", "parent_id 1 is not defined"});

  batch_.clear_paths();
  AddPath(batch_, 1, 0, "parent");
  AddPath(batch_, 2, 1, "child");
  EXPECT_TRUE(Validate().ok());

  batch_.clear_paths();
  KnowModelAndGemm();
  AddPath(batch_, 5, 1, "from an earlier batch");
  EXPECT_TRUE(Validate().ok());
}

TEST_F(BatchValidatorTest, PathRedefinitionMustMatch) {
  KnowModelAndGemm();
  AddPath(batch_, 1, 0, "model");
  ASSERT_TRUE(Validate().ok());
  EXPECT_EQ(added_.path_count(), 0u);

  batch_.clear_paths();
  AddPath(batch_, 1, 0, "model", "other-domain");
  ExpectRejected({"paths[0]", "redefines path 1 with different content"});

  batch_.clear_paths();
  AddPath(batch_, 2, 0, "a");
  AddPath(batch_, 2, 1, "a");  // same name, different parent
  ExpectRejected({"paths[1]", "redefines path 2"});
}

TEST_F(BatchValidatorTest, NestingDepthIsLimited) {
  for (uint64_t id = 1; id <= kMaxNestingDepth; ++id) AddPath(batch_, id, id - 1, "m");
  ASSERT_TRUE(Validate().ok());
  EXPECT_EQ(added_.FindPath(kMaxNestingDepth)->depth, kMaxNestingDepth);
  AddPath(batch_, kMaxNestingDepth + 1, kMaxNestingDepth, "too deep");
  ExpectRejected({"paths[256]", "nesting depth 257 exceeds 256"});
}

TEST_F(BatchValidatorTest, RangeEventRules) {
  KnowModelAndGemm();
  AddRange(batch_, 0, 0, 10);
  ExpectRejected({"ranges[0]", "path_id must be > 0"});

  batch_.clear_ranges();
  AddRange(batch_, 1, 0, 10);
  AddRange(batch_, 9, 0, 10);
  ExpectRejected({"ranges[1]", "path_id 9 is not defined"});

  batch_.clear_ranges();
  AddRange(batch_, 1, 0, 10)->set_instance_id(0);
  ExpectRejected({"ranges[0]", "instance_id must be > 0"});

  batch_.clear_ranges();
  AddRange(batch_, 1, 0, 10)->set_kind(static_cast<v1::RangeKind>(9));
  ExpectRejected({"ranges[0]", "kind 9 is not a RangeKind"});
}

TEST_F(BatchValidatorTest, AnInstanceIdComesOncePerBatch) {
  KnowModelAndGemm();
  AddRange(batch_, 1, 0, 10);
  AddRange(batch_, 1, 20, 10);
  const uint64_t repeated = batch_.ranges(0).instance_id();
  AddRange(batch_, 1, 40, 10)->set_instance_id(repeated);
  ExpectRejected(
      {"ranges[2]", absl::StrCat("instance_id ", repeated, " repeats ranges[0]").c_str()});

  batch_.mutable_ranges(2)->set_instance_id(batch_.ranges(1).instance_id() + 1);
  EXPECT_TRUE(Validate().ok()) << Validate();
}

TEST_F(BatchValidatorTest, AParentIsNumberedBeforeItsChildren) {
  KnowModelAndGemm();
  AddRange(batch_, 1, 0, 100);
  const uint64_t parent = batch_.ranges(0).instance_id();
  AddRange(batch_, 1, 10, 10)->set_parent_instance_id(parent);  // pushed later: a higher id
  EXPECT_TRUE(Validate().ok()) << Validate();

  batch_.mutable_ranges(0)->set_parent_instance_id(parent);
  ExpectRejected(
      {"ranges[0]",
       absl::StrCat("parent_instance_id ", parent, " is not below instance_id ", parent).c_str()});

  batch_.mutable_ranges(0)->set_parent_instance_id(parent + 1);
  ExpectRejected({"ranges[0]", absl::StrCat("parent_instance_id ", parent + 1).c_str()});

  // A parent this batch does not hold is fine: it pops later, maybe in a later batch.
  batch_.mutable_ranges(0)->set_parent_instance_id(parent - 1);
  EXPECT_TRUE(Validate().ok()) << Validate();
}

TEST_F(BatchValidatorTest, NoRangeStartsBeforeItsSession) {
  KnowModelAndGemm();
  session_start_ns_ = BaseNs();
  AddRange(batch_, 1, -kSessionStartSlackNs, 10);  // within the clock slack
  EXPECT_TRUE(Validate().ok()) << Validate();

  batch_.mutable_ranges(0)->set_start_ns(BaseNs() - kSessionStartSlackNs - 1);
  ExpectRejected({"ranges[0]",
                  absl::StrCat("start_ns ", BaseNs() - kSessionStartSlackNs - 1).c_str(),
                  absl::StrCat("session's start_time_ns ", BaseNs()).c_str()});

  // The campaign's 26-year range: from 2000-01-01 to now + 23 h, in a session started an hour ago.
  batch_.clear_ranges();
  AddRange(batch_, 1, 0, 10)->set_start_ns(kEarliestTimestampNs + 1);
  batch_.mutable_ranges(0)->set_end_ns(absl::ToUnixNanos(absl::Now() + absl::Hours(23)));
  ExpectRejected({"ranges[0]", "before the session's start_time_ns"});

  session_start_ns_ = 0;  // no start in the hello: only the fixed bounds hold
  EXPECT_TRUE(Validate().ok()) << Validate();
}

TEST_F(BatchValidatorTest, TimestampRules) {
  KnowModelAndGemm();
  AddRange(batch_, 1, 100, 10)->set_end_ns(BaseNs() + 50);
  ExpectRejected({"ranges[0]", "is before start_ns"});

  batch_.clear_ranges();
  AddRange(batch_, 1, 0, 10)->set_start_ns(1'000'000);  // microseconds since boot, say
  ExpectRejected({"ranges[0]", "start_ns 1000000 is outside [2000-01-01, now + 1 day]"});

  batch_.clear_ranges();
  AddKernel(batch_, 1, 1, 0, 10)->set_end_ns(absl::GetCurrentTimeNanos() + 2 * 86'400'000'000'000);
  ExpectRejected({"kernels[0]", "end_ns"});

  batch_.clear_kernels();
  AddKernel(batch_, 1, 1, 0, 10)->set_start_ns(std::numeric_limits<int64_t>::min());
  ExpectRejected({"kernels[0]", "start_ns"});

  batch_.clear_kernels();
  AddKernel(batch_, 1, 1, 0, 0);  // zero-length is fine
  EXPECT_TRUE(Validate().ok());
}

TEST_F(BatchValidatorTest, KernelReferences) {
  KnowModelAndGemm();
  AddKernel(batch_, 1, 1, 0, 10);
  AddKernel(batch_, 4, 1, 0, 10);
  ExpectRejected({"batch seq 7: kernels[1]: path_id 4 is not defined"});

  batch_.clear_kernels();
  AddKernel(batch_, 1, 3, 0, 10);
  ExpectRejected({"kernels[0]", "name_id 3 is not defined"});

  batch_.clear_kernels();
  AddKernel(batch_, 1, 0, 0, 10);
  ExpectRejected({"kernels[0]", "name_id must be > 0 for a kernel"});

  batch_.clear_kernels();
  v1::KernelRecord* copy = AddKernel(batch_, 0, 0, 0, 10);
  copy->set_kind(v1::ACTIVITY_KIND_MEMCPY);
  copy->set_bytes(1 << 20);
  EXPECT_TRUE(Validate().ok()) << "memcpy needs no name, root path allowed";

  copy->set_kind(static_cast<v1::ActivityKind>(42));
  ExpectRejected({"kernels[0]", "kind 42 is not an ActivityKind"});
}

TEST_F(BatchValidatorTest, KernelCanUseDefinitionsFromTheSameBatch) {
  AddString(batch_, 4, "relu");
  AddPath(batch_, 8, 0, "mlp");
  AddKernel(batch_, 8, 4, 0, 10);
  EXPECT_TRUE(Validate().ok());
}

TEST_F(BatchValidatorTest, FlopCounterRules) {
  KnowModelAndGemm();
  v1::FlopCounters* flops = AddKernelFlops(batch_, 1, 1, 0)->mutable_flops();
  flops->set_fp32(1e9);
  flops->add_tensor()->set_source("bf16_dst_fp32");
  EXPECT_TRUE(Validate().ok());

  flops->set_fp16(-1);
  ExpectRejected({"kernel_flops[0]", "flops: counts must be finite and >= 0"});

  flops->set_fp16(std::numeric_limits<double>::quiet_NaN());
  ExpectRejected({"kernel_flops[0]", "finite"});

  flops->set_fp16(0);
  flops->mutable_tensor(0)->set_flops(std::numeric_limits<double>::infinity());
  ExpectRejected({"kernel_flops[0]", "tensor flops must be finite and >= 0"});

  flops->mutable_tensor(0)->set_flops(1);
  flops->add_tensor();  // no source
  ExpectRejected({"kernel_flops[0]", "tensor source is empty"});
}

TEST_F(BatchValidatorTest, RawCountersAreBoundedNamedAndFinite) {
  KnowModelAndGemm();
  v1::FlopCounters* flops = AddKernelFlops(batch_, 1, 1, 0)->mutable_flops();
  v1::FlopCounters::Raw* raw = flops->add_raw();
  raw->set_metric("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum");
  raw->set_value(12);
  EXPECT_TRUE(Validate().ok());

  raw->set_value(std::numeric_limits<double>::quiet_NaN());
  ExpectRejected({"kernel_flops[0]", "raw counter values must be finite"});

  raw->set_value(1);
  raw->set_metric("");
  ExpectRejected({"kernel_flops[0]", "raw metric is empty"});

  raw->set_metric("m");
  while (flops->raw_size() <= kMaxRawCountersPerKernel) *flops->add_raw() = *raw;
  ExpectRejected({"kernel_flops[0]", "too many entries"});
}

TEST_F(BatchValidatorTest, KernelFlopsReferenceDefinedPathsPhasesAndNames) {
  KnowModelAndGemm();
  known_.AddPath(2, 0, 0, "flopscope", "step");
  AddKernelFlops(batch_, 1, 1, 4, 2);
  AddKernelFlops(batch_, 0, 0, -1, 0);  // unattributed, name unknown, no step, no phase
  EXPECT_TRUE(Validate().ok()) << Validate();

  batch_.mutable_kernel_flops(1)->set_path_id(9);
  ExpectRejected({"batch seq 7: kernel_flops[1]: path_id 9 is not defined"});

  batch_.mutable_kernel_flops(1)->set_path_id(0);
  batch_.mutable_kernel_flops(1)->set_phase_path_id(5);
  ExpectRejected({"kernel_flops[1]: phase_path_id 5 is not defined"});

  batch_.mutable_kernel_flops(1)->set_phase_path_id(0);
  batch_.mutable_kernel_flops(1)->set_name_id(3);
  ExpectRejected({"kernel_flops[1]: name_id 3 is not defined"});

  batch_.mutable_kernel_flops(1)->set_name_id(0);
  batch_.mutable_kernel_flops(1)->set_counted_step(-2);
  ExpectRejected({"kernel_flops[1]: counted_step -2 is outside [-1, "});

  batch_.mutable_kernel_flops(1)->set_counted_step(kMaxStepOrdinal + 1);
  ExpectRejected({"kernel_flops[1]: counted_step"});

  batch_.mutable_kernel_flops(1)->set_counted_step(0);
  batch_.mutable_kernel_flops(1)->clear_flops();
  ExpectRejected({"kernel_flops[1]: flops is missing"});
}

TEST_F(BatchValidatorTest, KernelFlopsMayUseDefinitionsOfTheSameBatch) {
  AddString(batch_, 4, "relu");
  AddPath(batch_, 8, 0, "mlp");
  AddPath(batch_, 9, 0, "forward", "flopscope");
  AddKernelFlops(batch_, 8, 4, 0, 9);
  EXPECT_TRUE(Validate().ok()) << Validate();
}

TEST_F(BatchValidatorTest, WindowRules) {
  AddWindow(batch_, 3, 4);
  AddWindow(batch_, -1, -1);  // a process without step marks
  EXPECT_TRUE(Validate().ok()) << Validate();

  v1::CounterWindowRecord* window = batch_.mutable_windows(1);
  window->set_first_step(-1);
  window->set_last_step(2);
  ExpectRejected({"windows[1]", "steps -1-2 are not a step range"});

  window->set_first_step(5);
  window->set_last_step(4);
  ExpectRejected({"windows[1]", "not a step range"});

  window->set_first_step(0);
  window->set_last_step(kMaxWindowSteps);
  ExpectRejected({"windows[1]", "span more than 10000 steps"});

  window->set_last_step(kMaxWindowSteps - 1);
  EXPECT_TRUE(Validate().ok());

  window->set_end_ns(window->start_ns() - 1);
  ExpectRejected({"windows[1]", "end_ns", "is before start_ns"});

  window->set_end_ns(window->start_ns());
  window->set_start_ns(5);  // not epoch nanoseconds
  ExpectRejected({"windows[1]", "start_ns 5 is outside"});

  *window = *batch_.mutable_windows(0);
  window->set_status(std::string(kMaxNameBytes + 1, 's'));
  ExpectRejected({"windows[1]", "status is 4097 bytes long"});

  window->set_status("hardware busy (DCGM?)");
  window->set_chip("\xff");
  ExpectRejected({"windows[1]", "chip is not valid UTF-8"});

  window->set_chip("GH100");
  window->set_passes(kMaxReplayPasses + 1);
  ExpectRejected({"windows[1]", "passes 1001 exceeds 1000"});

  window->set_passes(2);
  window->set_kernels_counted(kMaxWindowCount);
  ExpectRejected({"windows[1]", "kernels_counted"});

  window->set_kernels_counted(12);
  EXPECT_TRUE(Validate().ok());
}

TEST_F(BatchValidatorTest, CountedFlagsAreAcceptedEitherWay) {
  KnowModelAndGemm();
  AddRange(batch_, 1, 0, 100)->set_counted(true);
  AddKernel(batch_, 1, 1, 10, 20)->set_counted(true);
  AddKernel(batch_, 1, 1, 40, 20);
  EXPECT_TRUE(Validate().ok()) << Validate();
}

TEST_F(BatchValidatorTest, CountedRecordsCountTowardsTheBatchLimit) {
  KnowModelAndGemm();
  for (size_t i = 0; i < kMaxRecordsPerBatch; ++i) batch_.add_kernel_flops();
  AddWindow(batch_, 0, 0);
  ExpectRejected({"holds 1000001 records"});
}

TEST_F(BatchValidatorTest, MetadataRules) {
  AddMetadata(batch_, "", "x");
  ExpectRejected({"metadata[0]", "key is empty"});

  batch_.clear_metadata();
  AddMetadata(batch_, std::string(kMaxMetadataKeyBytes + 1, 'k'), "x");
  ExpectRejected({"metadata[0]", "key is 1025 bytes long"});

  batch_.clear_metadata();
  AddMetadata(batch_, "k", std::string(kMaxMetadataValueBytes + 1, 'v'));
  ExpectRejected({"metadata[0]", "value is 65537 bytes long"});

  batch_.clear_metadata();
  AddMetadata(batch_, "k", "\xed\xa0\x80");  // a UTF-16 surrogate
  ExpectRejected({"metadata[0]", "value is not valid UTF-8"});

  batch_.clear_metadata();
  AddMetadata(batch_, "gpu.0.name", "H100")->set_time_ns(0);  // no time known: fine
  AddMetadata(batch_, "params model", "")->set_time_ns(0);    // empty value: fine
  EXPECT_TRUE(Validate().ok());

  AddMetadata(batch_, "late", "x")->set_time_ns(631'152'000'000'000'000);  // 1990
  ExpectRejected({"metadata[2]", "time_ns"});
}

TEST_F(BatchValidatorTest, LossCauseMustBeKnown) {
  fixtures::AddLoss(batch_, v1::LOSS_CAUSE_CUPTI_DROPPED, 5);
  EXPECT_TRUE(Validate().ok());
  fixtures::AddLoss(batch_, static_cast<v1::LossCause>(99), 1);
  ExpectRejected({"losses[1]", "cause 99 is not a LossCause"});
}

TEST_F(BatchValidatorTest, TheDaemonsOwnLossCausesAreRefusedFromProducers) {
  fixtures::AddLoss(batch_, v1::LOSS_CAUSE_NOT_ARRIVED, 3);
  ExpectRejected({"losses[0]", "counted by the daemon only"});
  batch_.clear_losses();
  fixtures::AddLoss(batch_, v1::LOSS_CAUSE_ENDED_WITHOUT_FINAL, 1);
  ExpectRejected({"losses[0]", "counted by the daemon only"});
  batch_.clear_losses();
  fixtures::AddLoss(batch_, v1::LOSS_CAUSE_KILLED, 5);
  ExpectRejected({"losses[0]", "counted by the daemon only"});
}

TEST_F(BatchValidatorTest, ForwardDroppedIsTakenFromANodeDaemonOnly) {
  // A node daemon's outbox count (issue 34): a producer's stream or spool cannot claim it.
  fixtures::AddLoss(batch_, v1::LOSS_CAUSE_FORWARD_DROPPED, 40);
  ExpectRejected({"losses[0]", "cause 15 is counted by a node daemon only"});
  EXPECT_EQ(RejectedRule(Validate()), "losses");
  const absl::Status forwarded =
      BatchValidator(known_, absl::Now(), session_start_ns_, BatchOrigin::kNodeDaemon)
          .Validate(batch_, &added_);
  EXPECT_TRUE(forwarded.ok()) << forwarded;
  // The daemon's own end counts stay refused from a node daemon too: the aggregator counts them.
  fixtures::AddLoss(batch_, v1::LOSS_CAUSE_KILLED, 5);
  EXPECT_FALSE(BatchValidator(known_, absl::Now(), session_start_ns_, BatchOrigin::kNodeDaemon)
                   .Validate(batch_, &added_)
                   .ok());
}

TEST_F(BatchValidatorTest, LossRecordsStayClearOfWrapAround) {
  fixtures::AddLoss(batch_, v1::LOSS_CAUSE_BUFFER_FULL, kMaxLossRecords - 1);
  EXPECT_TRUE(Validate().ok());
  // Two sessions of 2^64-1 each summed to 2^65-2 mod 2^64 in the listing before the rule.
  fixtures::AddLoss(batch_, v1::LOSS_CAUSE_BUFFER_FULL, std::numeric_limits<uint64_t>::max());
  ExpectRejected({"losses[1]", "records 18446744073709551615 is not below"});
}

}  // namespace
}  // namespace flopscope::daemon

namespace flopscope::daemon {
namespace {

// A snapshot of open ranges at BaseNs() + 1 s, with one thread holding `modules` (path ids, each
// opened a millisecond after the one before) under one `step` phase (path 3).
void SetOpenRanges(v1::Batch& batch, const std::vector<uint64_t>& modules) {
  batch.clear_open_ranges();
  v1::OpenRanges* open = batch.mutable_open_ranges();
  open->set_time_ns(BaseNs() + 1'000'000'000);
  v1::ThreadOpenRanges* thread = open->add_threads();
  thread->set_thread_id(42);
  v1::OpenRange* step = thread->add_phases();
  step->set_path_id(3);
  step->set_start_ns(BaseNs());
  thread->set_phase_depth(1);
  int64_t start = BaseNs();
  for (uint64_t path : modules) {
    v1::OpenRange* range = thread->add_modules();
    range->set_path_id(path);
    range->set_start_ns(start += 1'000'000);
  }
  thread->set_module_depth(static_cast<uint32_t>(modules.size()));
}

class OpenRangesValidatorTest : public BatchValidatorTest {
 protected:
  OpenRangesValidatorTest() {
    AddPath(batch_, 1, 0, "model");
    AddPath(batch_, 2, 1, "layer.0");
    AddPath(batch_, 3, 0, "step", "flopscope");
  }
};

TEST_F(OpenRangesValidatorTest, AcceptsASnapshotAlone) {
  SetOpenRanges(batch_, {1, 2});
  EXPECT_TRUE(Validate().ok()) << Validate();
  EXPECT_EQ(BatchRecordCount(batch_), 3u) << "a snapshot is not a record";
  batch_.mutable_open_ranges()->clear_threads();  // nothing open
  EXPECT_TRUE(Validate().ok()) << Validate();
}

TEST_F(OpenRangesValidatorTest, RefusesUndefinedPathsAndImplausibleTimes) {
  SetOpenRanges(batch_, {1, 99});
  ExpectRejected({"open_ranges[0]", "modules[1]: path_id 99 is not defined"});
  SetOpenRanges(batch_, {});
  batch_.mutable_open_ranges()->mutable_threads(0)->mutable_phases(0)->set_path_id(0);
  ExpectRejected({"open_ranges[0]", "phases[0]: path_id 0"});
  SetOpenRanges(batch_, {1});
  batch_.mutable_open_ranges()->mutable_threads(0)->mutable_modules(0)->set_start_ns(
      batch_.open_ranges().time_ns() + 1);
  ExpectRejected({"open_ranges[0]", "after the snapshot's time_ns"});
  SetOpenRanges(batch_, {1});
  batch_.mutable_open_ranges()->set_time_ns(5);
  ExpectRejected({"open_ranges[0]", "time_ns 5 is outside"});
}

TEST_F(OpenRangesValidatorTest, BoundsThreadsRangesAndDepth) {
  SetOpenRanges(batch_, std::vector<uint64_t>(kMaxOpenRangesPerStack + 1, 1));
  batch_.mutable_open_ranges()->mutable_threads(0)->set_module_depth(kMaxOpenRangesPerStack + 1);
  ExpectRejected({"open_ranges[0]", "modules: 65 ranges (at most 64)"});
  SetOpenRanges(batch_, {1, 2});
  batch_.mutable_open_ranges()->mutable_threads(0)->set_module_depth(1);
  ExpectRejected({"open_ranges[0]", "modules: depth 1 is not within [2, 256]"});
  batch_.mutable_open_ranges()->mutable_threads(0)->set_module_depth(kMaxNestingDepth + 1);
  ExpectRejected({"open_ranges[0]", "depth 257"});
  SetOpenRanges(batch_, {1});
  for (int i = 0; i < kMaxOpenRangeThreads; ++i) {
    *batch_.mutable_open_ranges()->add_threads() = batch_.open_ranges().threads(0);
  }
  ExpectRejected({"open_ranges[0]", "holds 1025 threads (at most 1024)"});
}

}  // namespace
}  // namespace flopscope::daemon
