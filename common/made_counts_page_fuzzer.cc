// Fuzzes the made-counts parser (ParseMadeCounts): flopscoped's collector of orphaned spools
// reads the made-counts file beside each one, which another user wrote, so the bytes are
// untrusted. Besides not crashing: a file accepted is exactly kFileBytes long, its total is the
// sum of its slots, none of which has bytes after its count, and the session it names takes
// exactly the length its header gives (the session's fields, each string with its length).

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
  flopscope::MadeSession session;
  session.session_id = "left over";  // the parser must clear it or fill it
  std::string error;
  if (!flopscope::ParseMadeCounts(bytes, size, &total, &session, &error)) {
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
  uint32_t session_bytes = 0;
  std::memcpy(&session_bytes, bytes + 12, sizeof session_bytes);
  if (!session.known()) {
    if (session_bytes != 0 || session.session_id == "left over") std::abort();
    return 0;
  }
  size_t named = 3 * 4 + 6 * 4 + 2 * 8 + 6 * 4;
  for (const std::string* text :
       {&session.session_id, &session.job_id, &session.host, &session.injector_version,
        &session.layout_source, &session.command}) {
    named += text->size();
  }
  if (named != session_bytes || named > MadeCountsPage::kSessionBytes) std::abort();
  return 0;
}
