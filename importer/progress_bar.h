#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace flopscope::importer {

// A one-line progress bar for reading a large file on a terminal:
//   rank0.json.gz  [##########..........]  52%  38.1 MB/s
// redrawn in place at most ten times a second. Inactive (prints nothing) unless `enabled`; the
// caller decides (a terminal, --progress, a file big enough to wait for).
class ProgressBar {
 public:
  ProgressBar(std::ostream& out, std::string label, bool enabled, absl::Time start = absl::Now())
      : out_(out), label_(std::move(label)), enabled_(enabled), start_(start) {}
  ~ProgressBar() { Done(); }

  // `done` of `total` units (bytes); `now` is injectable for tests.
  void Update(uint64_t done, uint64_t total, absl::Time now = absl::Now());
  // Erases the bar (the summary line follows on a clean line).
  void Done();

  // The bar's text for `done` of `total` after `elapsed`, without the carriage return.
  static std::string Render(absl::string_view label, uint64_t done, uint64_t total,
                            absl::Duration elapsed);

 private:
  std::ostream& out_;
  const std::string label_;
  const bool enabled_;
  const absl::Time start_;
  absl::Time last_draw_ = absl::InfinitePast();
  size_t drawn_width_ = 0;
};

}  // namespace flopscope::importer
