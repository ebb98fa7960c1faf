#pragma once

#include <string>
#include <string_view>

namespace flopscope::client {

// `flopscope report JOB --format html`: one self-contained page (no network: its style, script
// and data are inline) that draws the report document `flopscope report --format json` writes —
// the very same JSON, embedded, so the pictures never show other figures than the JSON does.
// The page (client/documents/html_report/report.{html,css,js}) renders the icicle of the module
// tree, the DeepSpeed summary, the module table, the ranks x modules heatmap, step time per rank
// and measured against estimated FLOPs; docs/architecture.md ("The HTML report") says how.
std::string RenderReportHtml(std::string_view report_json, std::string_view job);

// `json` made safe as the text of a <script type="application/json"> element: every '<' becomes
// the JSON escape \u003c, so no "</script" or "<!--" can end or bend the element. '<' only ever
// appears inside JSON strings, where the escape reads back as the same character.
std::string JsonForScriptElement(std::string_view json);

// `text` for HTML text or a quoted attribute: & < > " ' as character references.
std::string HtmlEscape(std::string_view text);

}  // namespace flopscope::client
