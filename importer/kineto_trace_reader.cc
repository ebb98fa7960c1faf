#include "importer/kineto_trace_reader.h"

#include <memory>

#include "importer/byte_source.h"
#include "importer/json_event_splitter.h"
#include "importer/kineto_event_reader.h"
#include "importer/kineto_header.h"

namespace flopscope::importer {
namespace {

constexpr uint64_t kProgressEveryEvents = 16384;

class KinetoTraceVisitor final : public JsonTraceVisitor {
 public:
  KinetoTraceVisitor(TraceRecording* recording, const ByteSource* source,
                     const ProgressCallback& progress)
      : events_(recording), header_(recording), source_(source), progress_(progress) {}

  absl::Status OnEvent(absl::string_view json, uint64_t offset) override {
    if (progress_ && ++since_progress_ == kProgressEveryEvents) {
      since_progress_ = 0;
      progress_(source_->file_bytes_read(), source_->file_size());
    }
    return events_.Read(json, offset);
  }

  absl::Status OnMember(absl::string_view key, absl::string_view json, uint64_t offset) override {
    return header_.Read(key, json, offset);
  }

  bool saw_legacy_categories() const { return events_.saw_legacy_categories(); }

 private:
  KinetoEventReader events_;
  KinetoHeader header_;
  const ByteSource* source_;
  const ProgressCallback& progress_;
  uint64_t since_progress_ = 0;
};

}  // namespace

absl::StatusOr<TraceRecording> ReadKinetoTrace(const std::string& path,
                                               const ProgressCallback& progress) {
  absl::StatusOr<std::unique_ptr<ByteSource>> source = ByteSource::Open(path);
  if (!source.ok()) return source.status();
  TraceRecording recording;
  recording.path = path;
  KinetoTraceVisitor visitor(&recording, source->get(), progress);
  JsonEventSplitter splitter(source->get(), &visitor);
  if (absl::Status s = splitter.Run(); !s.ok()) return s;
  if (!splitter.saw_event_array()) {
    return absl::InvalidArgumentError(
        "a JSON object without a \"traceEvents\" array: not a Chrome / Kineto trace");
  }
  recording.format = visitor.saw_legacy_categories() ? "kineto-json-legacy" : "kineto-json";
  recording.content_digest = (*source)->digest();
  recording.bytes_read = (*source)->bytes_delivered();
  if (progress) progress((*source)->file_bytes_read(), (*source)->file_size());
  return recording;
}

}  // namespace flopscope::importer
