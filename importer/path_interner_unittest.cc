#include "importer/path_interner.h"

#include <gtest/gtest.h>

namespace flopscope::importer {
namespace {

TEST(PathInternerTest, SameParentDomainAndNameIsOnePath) {
  PathInterner paths;
  const uint64_t model = paths.Intern(0, "", "Model_0");
  const uint64_t linear = paths.Intern(model, "", "Linear_0");
  EXPECT_EQ(paths.Intern(0, "", "Model_0"), model);
  EXPECT_NE(paths.Intern(0, "flopscope", "Model_0"), model);
  EXPECT_NE(paths.Intern(linear, "", "Linear_0"), linear);
  ASSERT_EQ(paths.paths().size(), 4u);
  for (size_t i = 0; i < paths.paths().size(); ++i) {
    EXPECT_EQ(paths.paths()[i].id(), i + 1);
    EXPECT_LT(paths.paths()[i].parent_id(), paths.paths()[i].id()) << "parents come first";
  }
  EXPECT_EQ(paths.FullName(linear), "Model_0/Linear_0");
}

}  // namespace
}  // namespace flopscope::importer
