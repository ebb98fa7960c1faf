#include "common/metadata_keys.h"

namespace flopscope {

bool IsPerModuleKey(std::string_view key) {
  for (std::string_view prefix : {"module ", "class ", "params ", "extra_repr ", "range_module ",
                                  "flops ", "macs ", "estimated_flops ", "estimated_macs ",
                                  "deepspeed_differs ", "params_shard ", "compiled "}) {
    if (key.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

}  // namespace flopscope
