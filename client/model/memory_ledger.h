#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "flopscope/v1/records.pb.h"
#include "google/protobuf/repeated_ptr_field.h"

namespace flopscope::client {

// The memory ledger of each rank (docs/design/memory-ledger.md): what its tensors held, by part,
// as the torch hooks measured them (`memory_ledger <rank>` marks, the last one of each rank), its
// allocator's peaks on a GPU (`memory_peak <rank>` marks, the highest), and beside them the static
// memory the usual formulas expect for the rank's setup (DDP, FSDP2, DeepSpeed ZeRO-0..3) and
// precision. A part held above its formula by more than kMemoryMargin is flagged. Pure
// arithmetic over the report's metadata, pinned by unit tests.

// A part measured above its expected bytes by more than this fraction is flagged.
inline constexpr double kMemoryMargin = 0.10;

// The parts, in the order every view shows them.
inline constexpr const char* kMemoryParts[] = {"params", "grads", "optimizer", "buckets"};

// One part of a rank's ledger.
struct MemoryPart {
  std::string name;                // one of kMemoryParts
  std::optional<double> held;      // bytes its tensors held; absent: not measured (DDP's buckets)
  std::optional<double> expected;  // the formula's bytes; absent: not in the formula
  double bytes_per_element = 0;    // the formula's bytes per parameter element, before division
  bool divided = false;            // the formula divides it by the data-parallel size
  bool flagged = false;            // held > expected * (1 + kMemoryMargin)
};

// One module path of a `memory_activations` mark: what its forward left allocated on a GPU
// (memory_allocated() after it less before it, its children's included), summed over its calls in
// the step; negative where it freed more than it kept.
struct ModuleActivation {
  std::string path;
  double bytes = 0;
};

// A `memory_activations` mark names at most this many module paths (the hooks name 50).
inline constexpr size_t kMaxActivationModules = 64;

struct RankMemory {
  int32_t rank = 0;
  int64_t step = 0;                      // the step the ledger was measured at the end of (0-based)
  std::string setup;                     // "single", "ddp", "fsdp2", "zero0" .. "zero3"
  int64_t dp = 1;                        // the data-parallel size the formula divides by
  double elements = 0;                   // Ψ: the model's parameter elements (full sizes)
  std::string dtype;                     // the parameters' dtype: "fp32", "bf16", "fp16", ...
  bool amp = false;                      // autocast was on in a forward (mixed precision's formula)
  std::optional<int> states;             // optimizer states per element the class keeps (Adam 2)
  bool bucket_view = false;              // DDP's gradient_as_bucket_view
  std::vector<MemoryPart> parts;         // kMemoryParts' order
  std::optional<double> rss_high_water;  // the process's (CPU), not tensor memory
  std::optional<double> cost_s;          // what the hooks' last measurement took
  // GPU peaks (`memory_peak`): the highest allocated and reserved of a step, the step of the
  // allocated one, and the highest allocated within each phase.
  std::optional<double> peak_allocated, peak_reserved;
  int64_t peak_step = -1;
  std::map<std::string, double> phase_peaks;
  // What a forward phase left allocated (the activations kept for backward), the most of any
  // step (GPU).
  std::optional<double> activations;
  // Per module (GPU, the last `memory_activations` mark): the step measured (-1: none), the
  // paths whose forwards left the most, most first, how many paths were measured, and what the
  // ones not named left in all.
  int64_t activations_step = -1;
  std::vector<ModuleActivation> module_activations;
  int64_t activation_modules = 0;
  double activations_rest = 0;

  std::optional<double> HeldTotal() const;      // the measured parts' sum (absent ones left out)
  std::optional<double> ExpectedTotal() const;  // the formula's parts' sum
  bool Flagged() const;
};

// "DDP", "FSDP2", "ZeRO-3", "DeepSpeed without ZeRO", "one replica" (single).
std::string SetupName(const std::string& setup);

// `memory_ledger <rank>`, `memory_peak <rank>` and `memory_activations <rank>`: the ledger's marks,
// shown by these views and not in the raw report's list of announced facts.
bool IsMemoryLedgerKey(const std::string& key);

// Every rank's ledger from the report's metadata, by rank; ranks with no `memory_ledger` mark
// but `memory_peak` or `memory_activations` ones get those alone (setup ""). A malformed
// `memory_activations` mark is ignored (the rank keeps its previous one).
std::vector<RankMemory> ReadMemoryLedger(
    const google::protobuf::RepeatedPtrField<flopscope::v1::Metadata>& metadata);

// The expected bytes of each part for the rank's setup, dtype, optimizer states and dp, and the
// flags, into `memory.parts` (their `held` already read).
void ApplyFormulas(RankMemory& memory);

}  // namespace flopscope::client
