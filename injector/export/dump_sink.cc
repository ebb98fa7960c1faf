#include "injector/export/dump_sink.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <initializer_list>

namespace flopscope::injector {
namespace {

std::string Escaped(const char* data, size_t size) {
  std::string out;
  out.reserve(size);
  for (size_t i = 0; i < size; ++i) {
    switch (data[i]) {
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\\':
        out += "\\\\";
        break;
      default:
        out.push_back(data[i]);
    }
  }
  return out;
}

std::string Escaped(fs_str text) { return Escaped(text.data, text.size); }
std::string Escaped(const std::string& text) { return Escaped(text.data(), text.size()); }

std::string Fields(std::initializer_list<std::string> fields) {
  std::string line;
  for (const std::string& field : fields) {
    if (!line.empty()) line.push_back('\t');
    line += field;
  }
  return line;
}

template <typename T>
std::string N(T value) {
  return std::to_string(value);
}

// Round-trips exactly (std::to_string keeps 6 decimals only).
std::string D(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

double TensorTotal(const fs_flop_counters& flops) {
  double total = 0;
  for (uint32_t i = 0; i < flops.num_tensor; ++i) total += flops.tensor[i].flops;
  return total;
}

}  // namespace

DumpSink::DumpSink(std::string path, SessionIdentity identity, std::string gpu_status)
    : path_(std::move(path)), identity_(std::move(identity)), gpu_status_(std::move(gpu_status)) {}

DumpSink::~DumpSink() {
  if (file_ != nullptr) std::fclose(file_);
}

bool DumpSink::Open(std::string* error) {
  file_ = std::fopen(path_.c_str(), "w");
  if (file_ == nullptr) {
    *error = "cannot write the debug dump " + path_ + ": " + std::strerror(errno);
    return false;
  }
  WriteHello();
  return true;
}

void DumpSink::WriteHello() {
  const ParallelLayout& l = identity_.layout;
  Line(Fields({"hello", Escaped(identity_.session_id), Escaped(identity_.job_id), N(identity_.rank),
               N(identity_.local_rank), N(identity_.world_size), N(l.tp_size), N(l.pp_size),
               N(l.dp_size), N(l.tp_rank), N(l.pp_rank), N(l.dp_rank), Escaped(l.source),
               Escaped(gpu_status_), Escaped(identity_.command)}));
}

void DumpSink::Line(const std::string& line) {
  std::fputs(line.c_str(), file_);
  std::fputc('\n', file_);
}

void DumpSink::Submit(const fs_batch& batch, uint64_t records) {
  Line(Fields({"batch", N(++batches_), N(static_cast<int>(batch.final))}));
  for (uint32_t i = 0; i < batch.num_strings; ++i) {
    Line(Fields({"string", N(batch.strings[i].id), Escaped(batch.strings[i].value)}));
  }
  for (uint32_t i = 0; i < batch.num_paths; ++i) {
    const fs_range_path& p = batch.paths[i];
    Line(Fields({"path", N(p.id), N(p.parent_id), Escaped(p.domain), Escaped(p.name)}));
  }
  for (uint32_t i = 0; i < batch.num_ranges; ++i) {
    const fs_range_event& r = batch.ranges[i];
    Line(Fields({"range", N(r.path_id), N(r.instance_id), N(r.parent_instance_id), N(r.thread_id),
                 N(r.start_ns), N(r.end_ns), N(r.kind), N(r.counted)}));
  }
  for (uint32_t i = 0; i < batch.num_kernels; ++i) {
    const fs_kernel& k = batch.kernels[i];
    Line(Fields({"kernel", N(k.correlation_id), N(k.path_id), N(k.range_instance_id), N(k.name_id),
                 N(k.start_ns), N(k.end_ns), N(k.counted)}));
  }
  for (uint32_t i = 0; i < batch.num_kernel_flops; ++i) {
    const fs_kernel_flops& k = batch.kernel_flops[i];
    Line(Fields({"flops", N(k.correlation_id), N(k.path_id), N(k.range_instance_id), N(k.name_id),
                 N(k.device_id), N(k.phase_path_id), N(k.counted_step), D(k.flops.fp64),
                 D(k.flops.fp32), D(k.flops.fp16), D(TensorTotal(k.flops))}));
  }
  for (uint32_t i = 0; i < batch.num_windows; ++i) {
    const fs_counter_window& w = batch.windows[i];
    Line(Fields({"window", N(w.first_step), N(w.last_step), Escaped(w.trigger),
                 Escaped(w.metric_set), Escaped(w.chip), N(w.passes), N(w.kernels_counted),
                 N(w.ranges_unmatched), N(w.start_ns), N(w.end_ns), Escaped(w.status)}));
  }
  for (uint32_t i = 0; i < batch.num_metadata; ++i) {
    const fs_metadata& m = batch.metadata[i];
    Line(Fields({"meta", Escaped(m.key), Escaped(m.value), N(m.time_ns)}));
  }
  for (uint32_t i = 0; i < batch.num_losses; ++i) {
    Line(Fields({"loss", N(batch.losses[i].cause), N(batch.losses[i].records)}));
  }
  records_ += records;
}

DeliveryOutcome DumpSink::Finish(uint32_t /*exit_timeout_ms*/) {
  DeliveryOutcome outcome;
  const bool failed = std::ferror(file_) != 0;
  if (std::fclose(file_) != 0 || failed) {
    outcome.undelivered_records = records_;
    outcome.reason = "writing the debug dump failed";
  }
  file_ = nullptr;
  return outcome;
}

}  // namespace flopscope::injector
