#include "daemon/validate/text_checks.h"

#include <string_view>

#include "absl/strings/str_cat.h"
#include "common/utf8.h"

namespace flopscope::daemon {

std::string TextProblem(absl::string_view text, size_t max_bytes, EmptyText empty) {
  if (text.empty()) return empty == EmptyText::kRejected ? "is empty" : "";
  if (text.size() > max_bytes) {
    return absl::StrCat("is ", text.size(), " bytes long (at most ", max_bytes, ")");
  }
  if (text.find('\0') != absl::string_view::npos) return "holds a NUL byte";
  if (!IsValidUtf8(std::string_view(text.data(), text.size()))) return "is not valid UTF-8";
  return "";
}

}  // namespace flopscope::daemon
