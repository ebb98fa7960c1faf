#include "importer/progress_bar.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace flopscope::importer {
namespace {

constexpr int kBarWidth = 20;
constexpr size_t kMaxLabel = 40;

}  // namespace

std::string ProgressBar::Render(absl::string_view label, uint64_t done, uint64_t total,
                                absl::Duration elapsed) {
  const double fraction =
      total == 0 ? 1.0 : std::min(1.0, static_cast<double>(done) / static_cast<double>(total));
  const int filled = static_cast<int>(fraction * kBarWidth);
  const std::string bar = std::string(filled, '#') + std::string(kBarWidth - filled, '.');
  const double seconds = absl::ToDoubleSeconds(elapsed);
  const double rate = seconds > 0 ? static_cast<double>(done) / seconds / 1e6 : 0;
  if (label.size() > kMaxLabel) label = label.substr(label.size() - kMaxLabel);
  return absl::StrFormat("%s  [%s]  %3d%%  %.1f MB/s", label, bar, static_cast<int>(fraction * 100),
                         rate);
}

void ProgressBar::Update(uint64_t done, uint64_t total, absl::Time now) {
  if (!enabled_ || now - last_draw_ < absl::Milliseconds(100)) return;
  last_draw_ = now;
  const std::string line = Render(label_, done, total, now - start_);
  out_ << '\r' << line;
  if (line.size() < drawn_width_) out_ << std::string(drawn_width_ - line.size(), ' ');
  out_ << std::flush;
  drawn_width_ = std::max(drawn_width_, line.size());
}

void ProgressBar::Done() {
  if (!enabled_ || drawn_width_ == 0) return;
  out_ << '\r' << std::string(drawn_width_, ' ') << '\r' << std::flush;
  drawn_width_ = 0;
}

}  // namespace flopscope::importer
