#include "injector/export/testing/dump_reader.h"

#include <fstream>
#include <sstream>

namespace flopscope::injector::testing {
namespace {

std::string Unescape(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size()) {
      const char next = text[++i];
      out.push_back(next == 't' ? '\t' : next == 'n' ? '\n' : next);
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

std::vector<std::string> SplitTabs(const std::string& line) {
  std::vector<std::string> fields;
  std::string field;
  std::istringstream in(line);
  while (std::getline(in, field, '\t')) fields.push_back(Unescape(field));
  if (!line.empty() && line.back() == '\t') fields.emplace_back();
  return fields;
}

Dump::Flops ParseFlops(const std::vector<std::string>& f) {
  Dump::Flops k;
  k.correlation_id = std::stoull(f[1]);
  k.path_id = std::stoull(f[2]);
  k.range_instance_id = std::stoull(f[3]);
  k.name_id = static_cast<uint32_t>(std::stoul(f[4]));
  k.device_id = static_cast<uint32_t>(std::stoul(f[5]));
  k.phase_path_id = std::stoull(f[6]);
  k.counted_step = std::stoll(f[7]);
  k.fp64 = std::stod(f[8]);
  k.fp32 = std::stod(f[9]);
  k.fp16 = std::stod(f[10]);
  k.tensor = std::stod(f[11]);
  return k;
}

Dump::Window ParseWindow(const std::vector<std::string>& f) {
  Dump::Window w;
  w.first_step = std::stoll(f[1]);
  w.last_step = std::stoll(f[2]);
  w.trigger = f[3];
  w.metric_set = f[4];
  w.chip = f[5];
  w.passes = static_cast<uint32_t>(std::stoul(f[6]));
  w.kernels_counted = std::stoull(f[7]);
  w.ranges_unmatched = std::stoull(f[8]);
  w.start_ns = std::stoll(f[9]);
  w.end_ns = std::stoll(f[10]);
  w.status = f[11];
  return w;
}

}  // namespace

std::string Dump::PathOf(uint64_t id) const {
  std::string path;
  while (id != 0) {
    auto it = paths.find(id);
    if (it == paths.end()) return path.empty() ? "?" : "?/" + path;
    path = path.empty() ? it->second.name : it->second.name + "/" + path;
    id = it->second.parent_id;
  }
  return path;
}

std::vector<Dump::Range> Dump::RangesAt(const std::string& path) const {
  std::vector<Range> out;
  for (const Range& range : ranges) {
    if (PathOf(range.path_id) == path) out.push_back(range);
  }
  return out;
}

uint64_t Dump::Loss(uint32_t cause) const {
  auto it = losses.find(cause);
  return it == losses.end() ? 0 : it->second;
}

Dump ReadDump(const std::string& file) {
  Dump dump;
  std::ifstream in(file);
  if (!in) {
    dump.problems.push_back("no dump at " + file);
    return dump;
  }
  std::string line;
  while (std::getline(in, line)) {
    const std::vector<std::string> f = SplitTabs(line);
    if (f.empty()) continue;
    const std::string& kind = f[0];
    try {
      if (kind == "hello") {
        dump.hello.assign(f.begin() + 1, f.end());
      } else if (kind == "batch" && f.size() == 3) {
        ++dump.batches;
        dump.final_is_last = f[2] == "1";  // the lines after a header belong to its batch
        if (dump.final_is_last) ++dump.final_batches;
      } else if (kind == "path" && f.size() == 5) {
        Dump::Path path{std::stoull(f[1]), std::stoull(f[2]), f[3], f[4]};
        if (dump.paths.count(path.id)) dump.problems.push_back("path defined twice: " + line);
        dump.paths[path.id] = path;
      } else if (kind == "range" && f.size() == 9) {
        Dump::Range r{std::stoull(f[1]),
                      std::stoull(f[2]),
                      std::stoull(f[3]),
                      std::stoull(f[4]),
                      std::stoll(f[5]),
                      std::stoll(f[6]),
                      static_cast<uint32_t>(std::stoul(f[7])),
                      f[8] == "1"};
        if (!dump.paths.count(r.path_id)) dump.problems.push_back("range before its path: " + line);
        dump.ranges.push_back(r);
      } else if (kind == "meta" && f.size() == 4) {
        dump.metadata.emplace_back(f[1], f[2]);
      } else if (kind == "loss" && f.size() == 3) {
        dump.losses[static_cast<uint32_t>(std::stoul(f[1]))] = std::stoull(f[2]);
      } else if (kind == "string" && f.size() == 3) {
        dump.strings[static_cast<uint32_t>(std::stoul(f[1]))] = f[2];
      } else if (kind == "flops" && f.size() == 12) {
        dump.flops.push_back(ParseFlops(f));
      } else if (kind == "window" && f.size() == 12) {
        dump.windows.push_back(ParseWindow(f));
      } else if (kind == "kernel" && f.size() == 8) {
        Dump::Kernel k{std::stoull(f[1]), std::stoull(f[2]),
                       std::stoull(f[3]), static_cast<uint32_t>(std::stoul(f[4])),
                       std::stoll(f[5]),  std::stoll(f[6]),
                       f[7] == "1"};
        if (k.path_id != 0 && !dump.paths.count(k.path_id)) {
          dump.problems.push_back("kernel before its path: " + line);
        }
        if (!dump.strings.count(k.name_id) && k.name_id != 0) {
          dump.problems.push_back("kernel before its name: " + line);
        }
        dump.kernels.push_back(k);
      } else {
        dump.problems.push_back("unexpected line: " + line);
      }
    } catch (const std::exception&) {
      dump.problems.push_back("unparsable line: " + line);
    }
  }
  return dump;
}

}  // namespace flopscope::injector::testing
