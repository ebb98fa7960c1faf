#include "injector/cupti/counter_windows/comm_kernels.h"

#include <gtest/gtest.h>

namespace flopscope::injector::cupti {
namespace {

TEST(CommKernelsTest, NcclKernelsAreRecognisedMangledOrNot) {
  // NCCL >= 2.19: C++ kernels taking the argument storage.
  EXPECT_TRUE(IsCommunicationKernel(
      "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE"));
  EXPECT_TRUE(IsCommunicationKernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
  EXPECT_TRUE(IsCommunicationKernel("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"));
  // Older NCCL.
  EXPECT_TRUE(IsCommunicationKernel("_Z38ncclKernel_AllReduce_RING_LL_Sum_float12ncclWorkElem"));
  EXPECT_TRUE(IsCommunicationKernel("ncclKernel_AllGather_RING_LL_Sum_int8_t"));
  EXPECT_TRUE(IsCommunicationKernel("mscclKernel_Sum_float_LL"));
}

TEST(CommKernelsTest, CollectiveNamespacesAreRecognised) {
  EXPECT_TRUE(IsCommunicationKernel(
      "_ZN4c10d16symmetric_memory27one_shot_all_reduce_kernelIfLi16ELi8EEEvPPT_S3_mmm"));
  EXPECT_TRUE(IsCommunicationKernel("_ZN7deep_ep9intranode8dispatchILi8EEEvPv"));
  EXPECT_TRUE(IsCommunicationKernel("c10d::symmetric_memory::barrier_kernel(unsigned int)"));
}

TEST(CommKernelsTest, ComputeKernelsAreNot) {
  EXPECT_FALSE(IsCommunicationKernel("_Z4gemmPfS_S_"));
  EXPECT_FALSE(IsCommunicationKernel("ampere_sgemm_128x64_nn"));
  EXPECT_FALSE(
      IsCommunicationKernel("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_"
                            "11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_"));
  // A kernel merely named after NCCL inside another namespace is not NCCL's.
  EXPECT_FALSE(IsCommunicationKernel("_ZN5mylib10ncclKernelEv"));
  // A function called `c10d` is not the namespace.
  EXPECT_FALSE(IsCommunicationKernel("_Z4c10dv"));
  EXPECT_FALSE(IsCommunicationKernel(""));
  EXPECT_FALSE(IsCommunicationKernel("_Z"));
  EXPECT_FALSE(IsCommunicationKernel("_Z999x"));  // a length past the end
}

}  // namespace
}  // namespace flopscope::injector::cupti
