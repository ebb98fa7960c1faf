#pragma once

// The NVTX vocabulary every program shares (DESIGN: Time, Metadata channel): a producer marks
// steps, phases and metadata in one NVTX domain of its own; every other range is a module range
// in the default domain. The injector reads these names as ranges open, the importer gives them to
// traces that never named them, the daemon finds steps and phases by them, and the client reads
// a report's phases by them. One definition, so the four cannot drift apart.
//
// Plain character arrays (no std::string, no Abseil): the injector core includes this header.

namespace flopscope {

// The NVTX domain of steps, phases and metadata marks.
inline constexpr char kFlopscopeDomain[] = "flopscope";
// The range of one training step (`flopscope run --torch` pushes one around each step).
inline constexpr char kStepRange[] = "step";
// The phases inside a step: the passes a module's time is split into.
inline constexpr char kForwardPhase[] = "forward";
inline constexpr char kBackwardPhase[] = "backward";
inline constexpr char kOptimizerPhase[] = "optimizer";

}  // namespace flopscope
