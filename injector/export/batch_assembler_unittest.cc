#include "injector/export/batch_assembler.h"

#include <gtest/gtest.h>

#include <vector>

namespace flopscope::injector {
namespace {

struct Slice {
  uint32_t strings, paths, metadata, ranges, kernels, losses;
  bool final;
  uint64_t records;
};

std::vector<Slice> Slices(BatchAssembler* assembler) {
  std::vector<Slice> out;
  fs_batch batch;
  uint64_t records = 0;
  while (assembler->Next(&batch, &records)) {
    out.push_back(Slice{batch.num_strings, batch.num_paths, batch.num_metadata, batch.num_ranges,
                        batch.num_kernels, batch.num_losses, batch.final != 0, records});
  }
  return out;
}

ExportContent Content(const Domain* domain, size_t paths, size_t ranges, bool final) {
  ExportContent content;
  for (size_t i = 0; i < paths; ++i) {
    content.paths.push_back(PathDefinition{i + 1, 0, domain, "p" + std::to_string(i)});
  }
  for (size_t i = 0; i < ranges; ++i) {
    content.records.ranges.push_back(fs_range_event{1, i + 1, 0, 1, 1, 2, 1, 0});
  }
  content.losses = {fs_loss{1, 5}};
  content.final = final;
  return content;
}

TEST(BatchAssemblerTest, CutsByItemCountDefinitionsFirst) {
  DomainRegistry domains;
  BatchAssembler assembler(/*max_items=*/10, /*max_bytes=*/1 << 20);
  assembler.Reset(Content(domains.Default(), 4, 15, /*final=*/true), false);
  const std::vector<Slice> slices = Slices(&assembler);
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(slices[0].paths, 4u);
  EXPECT_EQ(slices[0].ranges, 6u);
  EXPECT_EQ(slices[1].paths, 0u);
  EXPECT_EQ(slices[1].ranges, 9u);
  EXPECT_FALSE(slices[0].final);
  EXPECT_TRUE(slices[1].final);
  EXPECT_EQ(slices[0].losses, 1u);  // cumulative losses ride on every batch
  EXPECT_EQ(slices[1].losses, 1u);
  EXPECT_EQ(slices[0].records, 6u);
}

TEST(BatchAssemblerTest, CutsByEstimatedBytes) {
  DomainRegistry domains;
  BatchAssembler assembler(/*max_items=*/100000, /*max_bytes=*/64 * 100);
  assembler.Reset(Content(domains.Default(), 0, 250, false), false);
  const std::vector<Slice> slices = Slices(&assembler);
  ASSERT_EQ(slices.size(), 3u);
  EXPECT_EQ(slices[0].ranges, 100u);
  EXPECT_EQ(slices[2].ranges, 50u);
}

TEST(BatchAssemblerTest, OversizedDefinitionTravelsAlone) {
  DomainRegistry domains;
  BatchAssembler assembler(100, /*max_bytes=*/100);
  ExportContent content = Content(domains.Default(), 0, 1, false);
  content.paths.push_back(PathDefinition{1, 0, domains.Default(), std::string(500, 'x')});
  assembler.Reset(std::move(content), false);
  const std::vector<Slice> slices = Slices(&assembler);
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(slices[0].paths, 1u);
  EXPECT_EQ(slices[0].ranges, 0u);
  EXPECT_EQ(slices[1].ranges, 1u);
}

TEST(BatchAssemblerTest, NothingToSendMeansNoBatchUnlessAsked) {
  DomainRegistry domains;
  BatchAssembler assembler;
  assembler.Reset(Content(domains.Default(), 0, 0, false), /*send_empty=*/false);
  EXPECT_TRUE(Slices(&assembler).empty());
  assembler.Reset(Content(domains.Default(), 0, 0, true), /*send_empty=*/true);
  const std::vector<Slice> slices = Slices(&assembler);
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_TRUE(slices[0].final);
  EXPECT_EQ(slices[0].losses, 1u);
}

TEST(BatchAssemblerTest, ViewsPointAtTheDefinitions) {
  DomainRegistry domains;
  const Domain* flopscope = domains.Create("flopscope");
  BatchAssembler assembler;
  ExportContent content;
  content.paths.push_back(PathDefinition{7, 3, flopscope, "step"});
  content.strings.push_back(StringDefinition{2, "_Z4gemm"});
  content.records.metadata.push_back(MetadataRecord{"k", "v", 11});
  assembler.Reset(std::move(content), false);
  fs_batch batch;
  uint64_t records = 0;
  ASSERT_TRUE(assembler.Next(&batch, &records));
  ASSERT_EQ(batch.num_paths, 1u);
  EXPECT_EQ(std::string(batch.paths[0].name.data, batch.paths[0].name.size), "step");
  EXPECT_EQ(std::string(batch.paths[0].domain.data, batch.paths[0].domain.size), "flopscope");
  EXPECT_EQ(batch.paths[0].parent_id, 3u);
  ASSERT_EQ(batch.num_strings, 1u);
  EXPECT_EQ(batch.strings[0].id, 2u);
  ASSERT_EQ(batch.num_metadata, 1u);
  EXPECT_EQ(std::string(batch.metadata[0].value.data, batch.metadata[0].value.size), "v");
  EXPECT_EQ(records, 1u);
}

std::string Text(fs_str text) { return std::string(text.data, text.size); }

KernelFlopsRecord Flops(uint64_t correlation_id, size_t tensor_entries) {
  KernelFlopsRecord record;
  record.correlation_id = correlation_id;
  record.counted_step = 3;
  record.fp32 = 100.0 * correlation_id;
  for (size_t i = 0; i < tensor_entries; ++i) {
    record.tensor.emplace_back("src" + std::to_string(i), 10.0 * (i + 1));
  }
  record.raw.emplace_back("sm__sass_thread_inst_executed_op_ffma_pred_on.sum", 50.0);
  return record;
}

TEST(BatchAssemblerTest, KernelFlopsKeepTheirOwnEntriesAcrossSlices) {
  DomainRegistry domains;
  BatchAssembler assembler(/*max_items=*/2, /*max_bytes=*/1 << 20);
  ExportContent content;
  content.records.kernel_flops = {Flops(1, 2), Flops(2, 0), Flops(3, 1)};
  CounterWindowRecord window;
  window.first_step = 3;
  window.last_step = 4;
  window.trigger = "env: steps=3-4";
  window.chip = "GH100";
  window.kernels_counted = 3;
  window.comm_kernels_excluded = 2;
  content.records.windows.push_back(window);
  assembler.Reset(std::move(content), false);

  fs_batch batch;
  uint64_t records = 0;
  ASSERT_TRUE(assembler.Next(&batch, &records));
  ASSERT_EQ(batch.num_kernel_flops, 2u);
  EXPECT_EQ(records, 2u);
  EXPECT_EQ(batch.kernel_flops[0].correlation_id, 1u);
  ASSERT_EQ(batch.kernel_flops[0].flops.num_tensor, 2u);
  EXPECT_EQ(Text(batch.kernel_flops[0].flops.tensor[1].source), "src1");
  EXPECT_DOUBLE_EQ(batch.kernel_flops[0].flops.tensor[1].flops, 20.0);
  ASSERT_EQ(batch.kernel_flops[0].flops.num_raw, 1u);
  EXPECT_DOUBLE_EQ(batch.kernel_flops[0].flops.raw[0].value, 50.0);
  EXPECT_EQ(batch.kernel_flops[1].flops.num_tensor, 0u);
  EXPECT_DOUBLE_EQ(batch.kernel_flops[1].flops.fp32, 200.0);
  EXPECT_EQ(batch.kernel_flops[1].counted_step, 3);

  ASSERT_TRUE(assembler.Next(&batch, &records));
  ASSERT_EQ(batch.num_kernel_flops, 1u);
  EXPECT_EQ(batch.kernel_flops[0].correlation_id, 3u);
  ASSERT_EQ(batch.kernel_flops[0].flops.num_tensor, 1u);
  EXPECT_EQ(Text(batch.kernel_flops[0].flops.tensor[0].source), "src0");  // its own, not #1's
  ASSERT_EQ(batch.num_windows, 1u);
  EXPECT_EQ(Text(batch.windows[0].trigger), "env: steps=3-4");
  EXPECT_EQ(Text(batch.windows[0].chip), "GH100");
  EXPECT_EQ(batch.windows[0].comm_kernels_excluded, 2u);
  EXPECT_EQ(batch.windows[0].last_step, 4);
  EXPECT_EQ(batch.windows[0].kernels_counted, 3u);
  EXPECT_EQ(records, 2u);
  EXPECT_FALSE(assembler.Next(&batch, &records));
}

}  // namespace
}  // namespace flopscope::injector
