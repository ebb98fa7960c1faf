// The marketing-name table of chip_names.h. Each row is from NVIDIA's public documents: the MIG
// user guide's "Supported GPUs" (Hopper, GA100, Blackwell data center and RTX PRO), the Ada
// architecture whitepaper (AD102, AD104) and the Ampere GA102 whitepaper.

#include "client/commands/chip_names.h"

#include <algorithm>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace flopscope::client {
namespace {

// Upper case, with spaces, dashes and underscores gone: "rtx-4090" -> "RTX4090".
std::string Squeezed(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (c == ' ' || c == '-' || c == '_' || c == '\t') continue;
    out += absl::ascii_toupper(static_cast<unsigned char>(c));
  }
  return out;
}

// Drops the brand words people put before a product name: "NVIDIAGEFORCERTX4090" -> "4090".
std::string WithoutBrand(std::string name) {
  for (const std::string prefix : {"NVIDIA", "GEFORCE", "TESLA", "RTX"}) {
    if (name.compare(0, prefix.size(), prefix) == 0) name = name.substr(prefix.size());
  }
  return name;
}

}  // namespace

const std::vector<ChipAlias>& ChipAliases() {
  static const auto* aliases = new std::vector<ChipAlias>{
      // Hopper (MIG user guide: H100 SXM5/PCIe, H100 on GH200, H20, H200 SXM5/NVL).
      {"H100", "GH100"},
      {"H200", "GH100"},
      {"GH200", "GH100"},
      {"H20", "GH100"},
      // Ampere (MIG user guide: A100 SXM4/PCIe, A30; GA102 whitepaper: A40, A10, RTX 3090,
      // RTX A6000).
      {"A100", "GA100"},
      {"A30", "GA100"},
      {"A40", "GA102"},
      {"A10", "GA102"},
      {"RTX 3090", "GA102"},
      {"RTX A6000", "GA102"},
      // Blackwell (MIG user guide: B200, GB200; RTX PRO 6000 and 5000 Blackwell; RTX PRO 4500
      // Blackwell).
      {"B200", "GB100"},
      {"GB200", "GB100"},
      {"RTX PRO 6000", "GB202"},
      {"RTX PRO 5000", "GB202"},
      {"RTX PRO 4500", "GB203"},
      // Ada (Ada architecture whitepaper: RTX 4090, RTX 6000 Ada, L40 and L40S on AD102; L4 on
      // AD104).
      {"L40S", "AD102"},
      {"L40", "AD102"},
      {"RTX 4090", "AD102"},
      {"RTX 6000 Ada", "AD102"},
      {"L4", "AD104"},
  };
  return *aliases;
}

std::string ChipForName(std::string_view name, const std::vector<std::string>& chips) {
  const std::string wanted = Squeezed(name);
  if (wanted.empty()) return "";
  for (const std::string& chip : chips) {
    if (Squeezed(chip) == wanted) return chip;
  }
  const std::string bare = WithoutBrand(wanted);
  for (const ChipAlias& alias : ChipAliases()) {
    const std::string product = Squeezed(alias.product);
    if (product == wanted || (!bare.empty() && WithoutBrand(product) == bare)) {
      return std::string(alias.chip);
    }
  }
  return "";
}

std::string ChipAliasList() {
  // Products grouped by chip, in the table's order of first appearance.
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::string>> products;
  for (const ChipAlias& alias : ChipAliases()) {
    const std::string chip(alias.chip);
    if (products.find(chip) == products.end()) order.push_back(chip);
    products[chip].emplace_back(alias.product);
  }
  std::vector<std::string> parts;
  for (const std::string& chip : order) {
    parts.push_back(absl::StrCat(absl::StrJoin(products[chip], ", "), " -> ", chip));
  }
  return absl::StrJoin(parts, "; ");
}

}  // namespace flopscope::client
