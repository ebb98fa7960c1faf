#include "injector/cupti/kernel_name_cache.h"

#include <gtest/gtest.h>

#include <cstring>

#include "injector/cupti/activity_parser.h"
#include "injector/cupti/testing/recording_sink.h"

namespace flopscope::injector::cupti {
namespace {

KernelRecord Kernel() {
  KernelRecord record;
  record.kind = kActivityKernel;
  return record;
}

TEST(KernelNameCacheTest, KernelsGetTheIdOfTheirNameAndMemoryActivitiesNone) {
  testing::RecordingSink sink;
  KernelNameCache cache;
  const char* gemm = "_Z4gemmPf";
  const char* softmax = "_Z7softmaxPf";
  KernelRecord copy;
  copy.kind = kActivityMemcpy;
  std::vector<KernelRecord> records = {Kernel(), Kernel(), copy, Kernel()};
  uint64_t unnamed = 0;
  cache.Resolve(&records, {gemm, softmax, nullptr, gemm}, &sink, &unnamed);
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(sink.NameOf(records[0].name_id), "_Z4gemmPf");
  EXPECT_EQ(sink.NameOf(records[1].name_id), "_Z7softmaxPf");
  EXPECT_EQ(records[2].name_id, 0u);
  EXPECT_EQ(records[3].name_id, records[0].name_id);
  EXPECT_EQ(unnamed, 0u);
}

TEST(KernelNameCacheTest, AReusedAddressWithAnotherNameIsInternedAfresh) {
  testing::RecordingSink sink;
  KernelNameCache cache;
  char storage[32];
  std::strcpy(storage, "_Z3oldv");
  std::vector<KernelRecord> first = {Kernel()};
  uint64_t unnamed = 0;
  cache.Resolve(&first, {storage}, &sink, &unnamed);
  std::strcpy(storage, "_Z3newv");  // CUPTI freed the old name; the address came back
  std::vector<KernelRecord> second = {Kernel()};
  cache.Resolve(&second, {storage}, &sink, &unnamed);
  EXPECT_EQ(sink.NameOf(first[0].name_id), "_Z3oldv");
  EXPECT_EQ(sink.NameOf(second[0].name_id), "_Z3newv");
}

TEST(KernelNameCacheTest, AKernelWithoutANameGetsAPlaceholder) {
  testing::RecordingSink sink;
  KernelNameCache cache;
  std::vector<KernelRecord> records = {Kernel()};
  uint64_t unnamed = 0;
  cache.Resolve(&records, {nullptr}, &sink, &unnamed);
  EXPECT_EQ(sink.NameOf(records[0].name_id), "<unnamed kernel>");
}

}  // namespace
}  // namespace flopscope::injector::cupti
