#pragma once

#include <string>
#include <vector>

#include "client/model/memory_ledger.h"
#include "common/json/json_writer.h"

namespace flopscope::client {

// The memory ledger in words (client/model/memory_ledger.h, docs/design/memory-ledger.md): the
// report's additions' table, the line per part above its formula, and `flopscope ranks`' cell.

// "grads: 16.5 KiB held, the ZeRO-3 formula expects 8.25 KiB (4 B x 4.22 K elements / dp 2):
// +100%" for a flagged part.
std::string MemoryFlagLine(const RankMemory& memory, const MemoryPart& part);

// The formula of one part in words: "4 B x 4.22 K elements / dp 2", "not in the formula".
std::string MemoryFormula(const RankMemory& memory, const MemoryPart& part);

// One line per distinct flag sentence, with the ranks it holds for: "rank 3 params: ..." or
// "ranks 0-7, 9 grads: ..." (64 ranks of one setup flag the same part with the same figures).
std::vector<std::string> MemoryFlagLines(const std::vector<RankMemory>& ranks);

// The additions' section: one row per rank (setup, each part held, held and expected totals,
// GPU peaks), then the flag lines (MemoryFlagLines), what was not measured and why, and the CPU's
// RSS high-water marks; "" when no rank announced a ledger. Over kMemoryRowsShown ranks, only the
// flagged ranks and the ones holding the least and the most get a row.
// On a GPU, the modules whose forwards left the most allocated follow (kActivationRowsShown, the
// most of any rank); where no rank measured peaks (the CPU), kActivationsCpuLine instead.
inline constexpr size_t kMemoryRowsShown = 16;
inline constexpr size_t kActivationRowsShown = 10;
inline constexpr char kActivationsCpuLine[] =
    "per-module activation memory: measured on GPUs only (the CPU allocator keeps no statistics)";
std::string MemoryLedgerSection(const std::vector<RankMemory>& ranks);

// `flopscope ranks`' cell: "66.3 KiB / 84.5 KiB" (held / expected), "!" after it when a part is
// above its formula; "-" with no ledger.
std::string MemoryCell(const std::vector<RankMemory>& ranks);

// One rank's ledger as a JSON object (docs/report.schema.json, $defs/memory_ledger):
//   {"rank": n, "step": n, "setup": "", "setup_name": "", "dp": n, "elements": x, "dtype": "",
//    "amp": bool, "optimizer_states": n|null, "bucket_view": bool,
//    "parts": {"params": {"held": x|null, "expected": x|null, "bytes_per_element": x,
//                         "divided": bool, "flagged": bool}, "grads": ..., "optimizer": ...,
//              "buckets": ...},
//    "held": x|null, "expected": x|null, "margin": x, "flagged": bool, "flags": [""],
//    "rss_high_water": x|null, "cost_s": x|null, "peak_allocated": x|null,
//    "peak_reserved": x|null, "peak_step": n|null, "activations": x|null,
//    "phase_peaks": {"forward": x, ...},
//    "module_activations": {"step": n, "modules": n, "rest": x,
//                           "top": [{"path": "", "bytes": x}]}|null}
// Bytes everywhere; null where not measured or not in the formula.
void WriteMemoryJson(const RankMemory& memory, JsonWriter& json);

}  // namespace flopscope::client
