// Fuzzes the made-counts parser (ParseMadeCounts): flopscoped's collector of orphaned spools
// reads the made-counts file beside each one, which another user wrote, so the bytes are
// untrusted. Besides not crashing: a file accepted is exactly kFileBytes long, and its total
// is the sum of its slots, none of which has bytes after its count.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/made_counts_page.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using flopscope::MadeCountsPage;
  const char* bytes = reinterpret_cast<const char*>(data);
  uint64_t total = 0;
  std::string error;
  if (!flopscope::ParseMadeCounts(bytes, size, &total, &error)) {
    if (error.empty()) std::abort();  // a refusal always says why
    return 0;
  }
  if (size != MadeCountsPage::kFileBytes) std::abort();
  uint64_t sum = 0;
  for (uint32_t slot = 0; slot < MadeCountsPage::kSlots; ++slot) {
    uint64_t count = 0;
    std::memcpy(&count, bytes + MadeCountsPage::kLineBytes * (slot + 1), sizeof count);
    sum += count;  // the parser refused any sum past 2^64
  }
  if (sum != total) std::abort();
  return 0;
}
