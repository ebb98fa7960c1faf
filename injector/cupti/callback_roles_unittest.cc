#include "injector/cupti/callback_roles.h"

#include <gtest/gtest.h>

namespace flopscope::injector::cupti {
namespace {

TEST(CallbackRolesTest, EveryKernelLaunchVariantIsALaunch) {
  for (const char* name :
       {"cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz",
        "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel_ptsz",
        "cuLaunchCooperativeKernelMultiDevice", "cuLaunch", "cuLaunchGrid", "cuLaunchGridAsync",
        "cudaLaunchKernel_v7000", "cudaLaunchKernel_ptsz_v7000", "cudaLaunchKernelExC_v11060",
        "cudaLaunchCooperativeKernel_v9000"}) {
    EXPECT_EQ(ClassifyApiCallback(name), CallbackRole::kLaunch) << name;
  }
}

TEST(CallbackRolesTest, GraphLaunchesAreTheirOwnRole) {
  EXPECT_EQ(ClassifyApiCallback("cuGraphLaunch"), CallbackRole::kGraphLaunch);
  EXPECT_EQ(ClassifyApiCallback("cuGraphLaunch_ptsz"), CallbackRole::kGraphLaunch);
  EXPECT_EQ(ClassifyApiCallback("cudaGraphLaunch_v10000"), CallbackRole::kGraphLaunch);
}

TEST(CallbackRolesTest, MemoryCopiesAndSetsAreMemory) {
  for (const char* name : {"cuMemcpyHtoD_v2", "cuMemcpyAsync_ptsz", "cuMemsetD32Async",
                           "cudaMemcpy_v3020", "cudaMemcpyAsync_v3020", "cudaMemset2D_v3020"}) {
    EXPECT_EQ(ClassifyApiCallback(name), CallbackRole::kMemory) << name;
  }
}

TEST(CallbackRolesTest, EverythingElseIsIgnored) {
  for (const char* name :
       {"cuCtxGetCurrent", "cuMemAlloc_v2", "cuStreamSynchronize", "cuLaunchHostFunc",
        "cudaLaunchHostFunc_v10000", "cudaGetDevice_v3020", "cuGraphCreate", ""}) {
    EXPECT_EQ(ClassifyApiCallback(name), CallbackRole::kIgnore) << name;
  }
}

TEST(CallbackRolesTest, GraphInstantiationIsHookedForItsNodes) {
  for (const char* name :
       {"cuGraphInstantiate", "cuGraphInstantiateWithFlags", "cuGraphInstantiateWithParams_ptsz",
        "cudaGraphInstantiate_v10000", "cudaGraphInstantiateWithParams_v12000"}) {
    EXPECT_EQ(ClassifyApiCallback(name), CallbackRole::kGraphInstantiate) << name;
  }
}

}  // namespace
}  // namespace flopscope::injector::cupti
