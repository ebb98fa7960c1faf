#include "client/documents/html_report.h"

#include <string>

#include "absl/strings/match.h"
#include "client/testing/json_parse_for_test.h"
#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

using testing::FlattenJson;

int Count(const std::string& text, const std::string& part) {
  int count = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++count;
  return count;
}

constexpr char kHostileJson[] =
    R"({"job": "</script><script>alert(1)</script>", "path": "<!--<script>", "n": 1})";

TEST(JsonForScriptElementTest, NoAngleBracketLeftAndTheSameDocumentReadsBack) {
  const std::string safe = JsonForScriptElement(kHostileJson);
  EXPECT_EQ(safe.find('<'), std::string::npos);
  absl::StatusOr<std::map<std::string, std::string>> before = FlattenJson(kHostileJson);
  if (absl::IsUnavailable(before.status())) GTEST_SKIP() << "python3 is needed to parse JSON";
  absl::StatusOr<std::map<std::string, std::string>> after = FlattenJson(safe);
  ASSERT_TRUE(before.ok() && after.ok()) << after.status();
  EXPECT_EQ(*before, *after);
}

TEST(RenderReportHtmlTest, ProducerTextCannotEndTheDataElement) {
  const std::string page = RenderReportHtml(kHostileJson, "job");
  // The data element and the script element close; nothing else does.
  EXPECT_EQ(Count(page, "</script>"), 2);
  EXPECT_FALSE(absl::StrContains(page, "<script>alert"));
  EXPECT_FALSE(absl::StrContains(page, "<!--<script>"));
  EXPECT_TRUE(absl::StrContains(page, JsonForScriptElement(kHostileJson)));
}

TEST(RenderReportHtmlTest, TheJobIdIsEscapedInTheTitle) {
  const std::string page = RenderReportHtml("{}", "a<b&\"c'");
  EXPECT_TRUE(absl::StrContains(page, "<title>flopscope report: a&lt;b&amp;&quot;c&#39;</title>"));
}

TEST(RenderReportHtmlTest, SelfContainedWithEveryPlaceholderFilled) {
  const std::string page = RenderReportHtml("{}", "job");
  for (const char* placeholder : {"{{TITLE}}", "{{STYLE}}", "{{SCRIPT}}", "{{DATA}}"}) {
    EXPECT_FALSE(absl::StrContains(page, placeholder)) << placeholder;
  }
  // Nothing is loaded from anywhere: no external script, style, image or font.
  for (const char* reference : {" src=", " href=", "@import", "url("}) {
    EXPECT_FALSE(absl::StrContains(page, reference)) << reference;
  }
  EXPECT_TRUE(absl::StrContains(page, "default-src 'none'"));
  EXPECT_TRUE(absl::StrContains(page, "id=\"report-data\">{}</script>"));
}

}  // namespace
}  // namespace flopscope::client
