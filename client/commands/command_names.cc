#include "client/commands/command_names.h"

#include <algorithm>
#include <cstddef>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace flopscope::client {
namespace {

constexpr size_t kMostEdits = 2;

// Optimal string alignment distance: insertions, deletions, substitutions and swaps of two
// neighbouring characters each cost one.
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string NearestCommand(std::string_view word, const std::vector<std::string>& commands) {
  const std::string lower = absl::AsciiStrToLower(std::string(word));
  std::string nearest;
  size_t best = kMostEdits + 1;
  bool tied = false;
  for (const std::string& command : commands) {
    const size_t distance = EditDistance(lower, command);
    // A short word is near everything: at most a third of its letters may change.
    if (distance > std::min(kMostEdits, std::max<size_t>(1, command.size() / 3))) continue;
    if (distance < best) {
      best = distance;
      nearest = command;
      tied = false;
    } else if (distance == best) {
      tied = true;
    }
  }
  return tied ? "" : nearest;
}

std::string UnknownCommandMessage(std::string_view word, const std::vector<std::string>& commands) {
  std::string message = absl::StrCat("unknown command '", std::string(word), "'");
  if (std::string nearest = NearestCommand(word, commands); !nearest.empty()) {
    absl::StrAppend(&message, "; did you mean '", nearest, "'?");
  }
  absl::StrAppend(
      &message, "\ncommands: ", absl::StrJoin(commands, ", "),
      "\n`flopscope help` lists what each does; `flopscope help CMD` shows its options");
  return message;
}

}  // namespace flopscope::client
