#include "daemon/flops_json.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace flopscope::daemon {

std::string JsonQuote(absl::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

std::string TensorFlopsJson(const v1::FlopCounters& flops) {
  std::string out = "{";
  for (int i = 0; i < flops.tensor_size(); ++i) {
    const v1::FlopCounters::Tensor& tensor = flops.tensor(i);
    absl::StrAppend(&out, i == 0 ? "" : ",", JsonQuote(tensor.source()), ":",
                    absl::StrFormat("%.17g", tensor.flops()));
  }
  out += '}';
  return out;
}

}  // namespace flopscope::daemon
