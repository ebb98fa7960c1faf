// The HTML report: the page template with its style, script and the report JSON put in place.
#include "client/documents/html_report.h"

#include "absl/strings/str_replace.h"
#include "client/documents/html_report/html_report_assets.h"

namespace flopscope::client {

std::string JsonForScriptElement(std::string_view json) {
  return absl::StrReplaceAll(absl::string_view(json.data(), json.size()), {{"<", "\\u003c"}});
}

std::string HtmlEscape(std::string_view text) {
  return absl::StrReplaceAll(
      absl::string_view(text.data(), text.size()),
      {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}, {"'", "&#39;"}});
}

std::string RenderReportHtml(std::string_view report_json, std::string_view job) {
  // One pass over the template: what is put in is never searched for placeholders again.
  return absl::StrReplaceAll(html_assets::k_template,
                             {{"{{TITLE}}", HtmlEscape(job)},
                              {"{{STYLE}}", html_assets::k_style},
                              {"{{SCRIPT}}", html_assets::k_script},
                              {"{{DATA}}", JsonForScriptElement(report_json)}});
}

}  // namespace flopscope::client
