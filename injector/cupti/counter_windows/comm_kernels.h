#pragma once

#include <string_view>

namespace flopscope::injector::cupti {

// Whether a kernel, by the name its launch callback reports (CUpti_CallbackData::symbolName,
// mangled or not), is a communication kernel: one that waits for peer GPUs (other ranks, or
// other devices of this process) to make progress. Kernel replay serialises and re-runs every
// launch of a context it profiles, so such a kernel must never be profiled: its peers are not
// replayed with it and it would spin forever (gpu-review D1; NVIDIA/nccl#536).
//
// Recognised, by the kernel's first name or namespace:
//   ncclKernel*, ncclDevKernel*   NCCL collectives and send/recv (every NCCL version since 2.0)
//   mscclKernel*                  MSCCL's collective kernels
//   c10d::*                       PyTorch's symmetric-memory and intra-node collectives
//   deep_ep::*                    DeepEP's dispatch/combine (barriers across ranks)
// Not recognisable by name: kernels of user code that call NVSHMEM or NCCL device APIs.
bool IsCommunicationKernel(std::string_view symbol);

}  // namespace flopscope::injector::cupti
