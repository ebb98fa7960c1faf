#include "daemon/report/demangle.h"

#include <gtest/gtest.h>

namespace flopscope::daemon {
namespace {

TEST(DemangleTest, DemanglesItaniumNames) {
  EXPECT_EQ(Demangle("_Z4gemmPfS_i"), "gemm(float*, float*, int)");
  EXPECT_EQ(Demangle("_ZN5flash3fwdEPKfi"), "flash::fwd(float const*, int)");
}

TEST(DemangleTest, LeavesOtherNamesAsTheyAre) {
  EXPECT_EQ(Demangle("ampere_sgemm_128x64_nn"), "ampere_sgemm_128x64_nn");
  EXPECT_EQ(Demangle("_Znot a name"), "_Znot a name");
  EXPECT_EQ(Demangle(""), "");
}

}  // namespace
}  // namespace flopscope::daemon
