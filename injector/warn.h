#pragma once

#include <string_view>

namespace flopscope::injector {

// The injector's one way to tell the person running the job something: a single line
// "flopscope: <text>\n" on stderr, written with one write(2) so lines from several threads or
// ranks never interleave mid-line. Control characters in `text` (it may carry names the job chose)
// are replaced so a warning can never move the cursor or forge a second line.
//
// Safe from any thread, including inside CUDA and NVTX callbacks: no lock, no allocation beyond a
// bounded stack buffer, no stdio (stdio's lock could be held by the very thread we interrupted).
void Warn(std::string_view text);

}  // namespace flopscope::injector
