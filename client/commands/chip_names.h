#pragma once

// Chip names as people write them: `flopscope counters --chip H100` means the GH100 chip that
// CUPTI's Profiler Host API knows. One table of marketing names (product -> chip, from NVIDIA's
// public documents: docs/cli.md lists them), matched case-insensitively with spaces, dashes and
// underscores ignored, and with a leading "NVIDIA", "GeForce", "Tesla" or "RTX" optional where
// the rest still names one product ("4090", "RTX 4090", "GeForce RTX 4090").

#include <string>
#include <string_view>
#include <vector>

namespace flopscope::client {

// One marketing name and the chip it is built on.
struct ChipAlias {
  std::string_view product;  // as written in NVIDIA's documents, e.g. "H100", "RTX 4090"
  std::string_view chip;     // as CUPTI names it, e.g. "GH100", "AD102"
};

// Every alias, in the order docs/cli.md lists them.
const std::vector<ChipAlias>& ChipAliases();

// `name` as CUPTI's chip name: a chip name itself (any case, "gh100"), or the chip of a product
// in ChipAliases(). Empty when it is neither: then nothing is guessed.
std::string ChipForName(std::string_view name, const std::vector<std::string>& chips);

// "H100, H200 -> GH100; A100 -> GA100; ..." for an error message.
std::string ChipAliasList();

}  // namespace flopscope::client
