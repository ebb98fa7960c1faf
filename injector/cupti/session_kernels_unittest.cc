// Kernel tracing wired into a real session (its own process: the session is a singleton): a
// launch inside an NVTX range, its record delivered by "CUPTI", collected by the tracer, exported
// by the session's exporter with the range's path, the kernel's name and the tracing status.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

#include "injector/cupti/kernel_tracer.h"
#include "injector/cupti/testing/activity_buffer_builder.h"
#include "injector/cupti/testing/fake_cupti.h"
#include "injector/kernel_api_sink.h"
#include "injector/session.h"
#include "injector/export/testing/dump_reader.h"

namespace flopscope::injector::cupti {
namespace {

using injector::testing::Dump;
using injector::testing::ReadDump;
using testing::ActivityBufferBuilder;
using testing::FakeCupti;

TEST(SessionKernelsTest, TracedKernelsAreExportedWithTheirRangeAndName) {
  const std::string dump_file =
      ::testing::TempDir() + "session-kernels-" + std::to_string(getpid()) + ".dump";
  setenv("FLOPSCOPE_DEBUG_DUMP", dump_file.c_str(), 1);
  setenv("FLOPSCOPE_KERNELS", "0", 1);  // the session's own tracer would look for a driver
  Session* session = Session::StartOnce();
  ASSERT_NE(session, nullptr);

  FakeCupti fake;
  fake.callback_names = {{{CUPTI_CB_DOMAIN_DRIVER_API, 307}, "cuLaunchKernel"}};
  KernelApiSink sink;
  TracerOptions options;
  options.buffer_cap_bytes = 8u << 20;
  KernelTracer tracer(&sink, options, fake.Api());
  ASSERT_TRUE(tracer.Attach().tracing);

  const Domain* domain = session->domains().Default();
  session->tracker().Push(domain, "Model");
  session->tracker().Push(domain, "attn");
  CUpti_CallbackData launch{};
  launch.callbackSite = CUPTI_API_ENTER;
  launch.correlationId = 42;
  KernelTracer::OnCallback(fake.userdata, CUPTI_CB_DOMAIN_DRIVER_API, 307, &launch);
  session->tracker().Pop(domain);
  session->tracker().Pop(domain);

  ActivityBufferBuilder records;
  ActivityBufferBuilder::Kernel kernel;
  kernel.correlation_id = 42;
  kernel.name = "_Z9attentionPf";
  kernel.start = 1'700'000'000'000'000'000ull;
  kernel.end = kernel.start + 5000;
  records.AddKernel(kernel);
  uint8_t* buffer = nullptr;
  size_t size = 0, max_records = 0;
  KernelTracer::OnBufferRequested(&buffer, &size, &max_records);
  ASSERT_NE(buffer, nullptr);
  KernelTracer::OnBufferCompleted(nullptr, 0, buffer, size, records.CopyTo(buffer));
  tracer.Collect(false);
  session->exporter()->Stop();  // the final batch, as at exit

  const Dump dump = ReadDump(dump_file);
  EXPECT_TRUE(dump.problems.empty()) << dump.problems[0];
  ASSERT_EQ(dump.kernels.size(), 1u);
  const Dump::Kernel& exported = dump.kernels[0];
  EXPECT_EQ(exported.correlation_id, 42u);
  EXPECT_EQ(dump.PathOf(exported.path_id), "Model/attn");
  EXPECT_EQ(dump.strings.at(exported.name_id), "_Z9attentionPf");
  ASSERT_EQ(dump.RangesAt("Model/attn").size(), 1u);
  EXPECT_EQ(exported.range_instance_id, dump.RangesAt("Model/attn")[0].instance_id);
  EXPECT_EQ(exported.start_ns, 1'700'000'000'000'000'000);  // CUPTI's ns, unconverted
  unlink(dump_file.c_str());
}

}  // namespace
}  // namespace flopscope::injector::cupti
