#include "client/documents/profile_export.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/documents/html_report.h"
#include "client/documents/report_json.h"
#include "client/testing/json_parse_for_test.h"
#include "client/testing/sample_report.h"
#include "client/text/profile_text.h"
#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

using flopscope::v1::Report;

Report TwoModuleReport() {
  Report report;
  report.set_job_id("csv");
  report.add_ranks()->set_world_size(1);
  auto add = [&](const std::string& path, uint32_t depth, uint64_t params, double flops,
                 int64_t ns) {
    auto* module = report.add_modules();
    module->set_path(path);
    module->set_name(path.substr(path.rfind('/') + 1));
    module->set_depth(depth);
    module->set_cpu_time_ns(ns);
    module->set_params(params);
    module->set_flops(flops);
  };
  add("Net", 0, 400, 8e9, 4'000'000);
  add("Net/odd, \"name\"", 1, 100, 2e9, 1'000'000);
  auto* batch = report.add_metadata();
  batch->set_key("batch_size");
  batch->set_value("16");
  return report;
}

TEST(ProfileExportTest, JsonKeepsTheReportAndAddsTheProfile) {
  const Report report = TwoModuleReport();
  const Profile profile = BuildProfile(report, {});
  const std::string json =
      RenderReportJson(report, [&](JsonWriter& writer) { WriteProfileJson(profile, writer); });
  absl::StatusOr<std::map<std::string, std::string>> flat = testing::FlattenJson(json);
  if (absl::IsUnavailable(flat.status())) GTEST_SKIP() << flat.status();
  ASSERT_TRUE(flat.ok()) << flat.status() << json;
  EXPECT_EQ(flat->at("job"), "\"csv\"");
  EXPECT_EQ(flat->at("modules[0].path"), "\"Net\"");
  EXPECT_EQ(flat->at("profile.batch_size"), "16");
  EXPECT_EQ(flat->at("profile.summary.params_per_gpu.value"), "400");
  EXPECT_EQ(flat->at("profile.summary.fwd_flops_per_gpu.value"), "8000000000.0");
  EXPECT_EQ(flat->at("profile.summary.fwd_latency_s.value"), "0.004");
  EXPECT_EQ(flat->at("profile.summary.fwd_flops_per_s.value"), "2000000000000.0");
  EXPECT_EQ(flat->at("profile.summary.bwd_latency_s.value"), "null");
  EXPECT_EQ(flat->at("profile.summary.mfu.value"), "null");
  EXPECT_EQ(flat->at("profile.modules#"), "2");
  // No step window and no phases: module latencies are whole-run totals, and say so.
  EXPECT_EQ(flat->at("profile.step_window.requested"), "false");
  EXPECT_EQ(flat->at("profile.step_window.counted#"), "0");
  EXPECT_EQ(flat->at("profile.modules[0].latency_min_s"), "null");
  EXPECT_EQ(flat->at("profile.latency_basis"),
            "\"no step or phase marked: module latencies are their totals over the run\"");
  EXPECT_EQ(flat->at("profile.modules[1].macs"), "1000000000.0");
  EXPECT_EQ(flat->at("profile.modules[1].flops_per_s"), "2000000000000.0");
  EXPECT_EQ(flat->at("profile.modules[1].path"), "\"Net/odd, \\\"name\\\"\"");
}

TEST(ProfileExportTest, CsvHasOneRowPerModuleWithShares) {
  const std::string csv = RenderProfileCsv(BuildProfile(TwoModuleReport(), {}));
  std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u) << csv;
  EXPECT_EQ(lines[0],
            "path,class,depth,params,params_pct,macs,macs_pct,latency_s,latency_pct,flops,"
            "flops_per_s,latency_min_s,latency_max_s,counted_steps,counted_kernels,name,"
            "model_path,ran,container,figures_from_children");
  // No step window: no min and max per step.
  // Numbers as people read them: the shortest text that reads back as the same value.
  EXPECT_EQ(lines[1],
            "Net,Net,0,400,100,4000000000,100,0.004,100,8000000000,"
            "2000000000000,,,0,0,Net,Net,true,false,false");
  // The quoted path and class hold a comma; the rest splits plainly.
  const std::string quoted = "\"Net/odd, \"\"name\"\"\",\"odd, \"\"name\"\"\",";
  ASSERT_EQ(lines[2].substr(0, quoted.size()), quoted);
  std::vector<std::string> rest = absl::StrSplit(lines[2].substr(quoted.size()), ',');
  // 13 figures, then the quoted name and model path (each split in two here) and 3 flags.
  ASSERT_EQ(rest.size(), 20u);
  EXPECT_EQ(rest[1], "100");  // params
  EXPECT_EQ(rest[2], "25");   // % params
  EXPECT_EQ(rest[4], "25");   // % MACs
  EXPECT_EQ(rest[6], "25");   // % latency
}

// One CSV record's fields (RFC 4180: quoted fields may hold commas and doubled quotes).
std::vector<std::string> CsvFieldsOf(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      fields.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

// The JSON a page embeds in its data element (JsonForScriptElement's \u003c reads back as '<').
std::string EmbeddedJson(const std::string& page) {
  const std::string open = "id=\"report-data\">";
  const size_t begin = page.find(open);
  if (begin == std::string::npos) return "";
  const size_t end = page.find("</script>", begin);
  return page.substr(begin + open.size(), end - begin - open.size());
}

// One row of a view: the module's model path, depth, and the flags a view gives it.
struct ViewRow {
  std::string model_path;
  std::string depth;
  std::string ran;
  std::string container;
  std::string figures_from_children;
  bool operator==(const ViewRow&) const = default;
};

std::vector<ViewRow> JsonRows(const std::map<std::string, std::string>& flat) {
  std::vector<ViewRow> rows;
  const int count = std::stoi(flat.at("profile.modules#"));
  for (int i = 0; i < count; ++i) {
    const std::string at = absl::StrCat("profile.modules[", i, "].");
    std::string model_path = flat.at(at + "model_path");
    rows.push_back({model_path.substr(1, model_path.size() - 2), flat.at(at + "depth"),
                    flat.at(at + "ran"), flat.at(at + "container"),
                    flat.at(at + "figures_from_children")});
  }
  return rows;
}

// Issue 29 item 4: the text's tree, the JSON, the CSV and the HTML page carry the same modules
// (containers and modules that never ran included, flagged) in the same, model order, and no
// row says both a latency and "never ran".
TEST(ProfileExportTest, EveryViewCarriesTheTextTreesModulesInModelOrder) {
  const Report report = testing::ContainerTreeReport();
  const Profile profile = BuildProfile(report, {});
  const std::vector<std::string> model_order = testing::ContainerTreeModelPaths();

  // The text: its detailed tree is the model (the loss is listed apart, after it).
  const std::vector<testing::TreeLine> tree =
      testing::DetailedTreeLines(RenderProfileText(profile, {}));
  ASSERT_EQ(tree.size(), model_order.size() - 1);
  ASSERT_EQ(profile.model_end, tree.size());
  ASSERT_EQ(profile.modules.size(), model_order.size());

  const std::string json =
      RenderReportJson(report, [&](JsonWriter& writer) { WriteProfileJson(profile, writer); });
  absl::StatusOr<std::map<std::string, std::string>> flat = testing::FlattenJson(json);
  if (absl::IsUnavailable(flat.status())) GTEST_SKIP() << flat.status();
  ASSERT_TRUE(flat.ok()) << flat.status() << json;
  const std::vector<ViewRow> rows = JsonRows(*flat);
  ASSERT_EQ(rows.size(), model_order.size()) << json;
  EXPECT_EQ(flat->at("profile.model_modules"), absl::StrCat(tree.size()));
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(model_order[i]);
    EXPECT_EQ(rows[i].model_path, model_order[i]);
    if (i >= tree.size()) continue;
    // The same row as the text's: depth, name and class.
    const std::string at = absl::StrCat("profile.modules[", i, "].");
    EXPECT_EQ(rows[i].depth, absl::StrCat(tree[i].depth));
    if (tree[i].depth > 0) {
      EXPECT_EQ(flat->at(at + "name"), "\"" + tree[i].name + "\"");
    }
    EXPECT_EQ(flat->at(at + "class"), "\"" + tree[i].class_name + "\"");
  }

  // Flags: what each row is.
  const std::map<std::string, ViewRow> flagged = {
      {"Net/layers", {"Net/layers", "1", "false", "true", "true"}},
      {"Net/heads", {"Net/heads", "1", "false", "true", "false"}},
      {"Net/heads.spare", {"Net/heads.spare", "2", "false", "false", "false"}},
      {"Net/unused", {"Net/unused", "1", "false", "false", "false"}}};
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(rows[i].model_path);
    const std::string at = absl::StrCat("profile.modules[", i, "].");
    auto found = flagged.find(rows[i].model_path);
    if (found == flagged.end()) {
      EXPECT_EQ(rows[i].ran, "true");
      EXPECT_EQ(rows[i].container, "false");
      EXPECT_EQ(flat->at(at + "note"), "null");
      continue;
    }
    EXPECT_EQ(rows[i], found->second);
    const std::string note = flat->at(at + "note");
    if (rows[i].figures_from_children == "true") {
      // A container whose children ran: their sum, said as what it is, not "never ran".
      EXPECT_FALSE(absl::StrContains(note, "never ran")) << note;
      EXPECT_TRUE(absl::StrContains(note, "container")) << note;
      EXPECT_GT(std::stod(flat->at(at + "latency_s")), 0) << "the sum of its children's";
    } else {
      EXPECT_TRUE(absl::StrContains(note, "never ran")) << note;
      EXPECT_EQ(std::stod(flat->at(at + "latency_s")), 0);
      EXPECT_EQ(flat->at(at + "bwd_latency_s"), "null");
      EXPECT_EQ(flat->at(at + "latency_min_s"), "null");
    }
  }
  // The aliased head keeps its range path, at its model path's place.
  EXPECT_EQ(flat->at("profile.modules[9].path"), "\"Net/layers.1/head\"");

  // The CSV: the JSON's rows, in its order, with the same flags.
  std::vector<std::string> lines =
      absl::StrSplit(RenderProfileCsv(profile), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), rows.size() + 1);
  const std::vector<std::string> header = CsvFieldsOf(lines[0]);
  std::map<std::string, size_t> column;
  for (size_t c = 0; c < header.size(); ++c) column[header[c]] = c;
  std::vector<ViewRow> csv_rows;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::vector<std::string> cells = CsvFieldsOf(lines[i]);
    ASSERT_EQ(cells.size(), header.size()) << lines[i];
    csv_rows.push_back({cells[column.at("model_path")], cells[column.at("depth")],
                        cells[column.at("ran")], cells[column.at("container")],
                        cells[column.at("figures_from_children")]});
  }
  EXPECT_EQ(csv_rows, rows);

  // The HTML page embeds the very same document, so its table and icicle draw these rows.
  const std::string page = RenderReportHtml(json, report.job_id());
  absl::StatusOr<std::map<std::string, std::string>> embedded =
      testing::FlattenJson(EmbeddedJson(page));
  ASSERT_TRUE(embedded.ok()) << embedded.status();
  EXPECT_EQ(JsonRows(*embedded), rows);
}

}  // namespace
}  // namespace flopscope::client
