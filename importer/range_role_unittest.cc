#include "importer/range_role.h"

#include <gtest/gtest.h>

namespace flopscope::importer {
namespace {

TEST(ClassifyAnnotationTest, Steps) {
  const AnnotationRole step = ClassifyAnnotation("ProfilerStep#551");
  EXPECT_EQ(step.role, RangeRole::kStep);
  EXPECT_EQ(step.flopscope_name, "step");
  EXPECT_EQ(step.step_number, 551);
  EXPECT_EQ(ClassifyAnnotation("ProfilerStep#").role, RangeRole::kModule);
  EXPECT_EQ(ClassifyAnnotation("ProfilerStep#x").role, RangeRole::kModule);
}

TEST(ClassifyAnnotationTest, Phases) {
  EXPECT_EQ(ClassifyAnnotation("## forward ##").flopscope_name, "forward");
  EXPECT_EQ(ClassifyAnnotation("Backward").flopscope_name, "backward");
  EXPECT_EQ(ClassifyAnnotation("## optimizer ##").flopscope_name, "optimizer");
  EXPECT_EQ(ClassifyAnnotation("Optimizer.step#SGD.step").flopscope_name, "optimizer");
}

TEST(ClassifyAnnotationTest, EverythingElseIsAModule) {
  for (const char* name : {"DistributedDataParallel.forward", "## forward:sparse_arch ##",
                           "Optimizer.zero_grad#SGD.zero_grad", "nccl:all_reduce", ""}) {
    EXPECT_EQ(ClassifyAnnotation(name).role, RangeRole::kModule) << name;
  }
}

}  // namespace
}  // namespace flopscope::importer
