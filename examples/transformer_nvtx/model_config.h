#pragma once

#include <cstdint>

namespace transformer_nvtx {

// The shape of the pretend model and of its training run (see main.cc for the options).
struct ModelConfig {
  int steps = 3;
  int layers = 2;
  int hidden = 256;
  int batch = 8;
  int seq = 128;
  int vocab = 8192;
  bool loader_thread = true;
  bool force_cpu = false;

  int64_t tokens() const { return static_cast<int64_t>(batch) * seq; }
};

}  // namespace transformer_nvtx
