// Fuzzes JsonEventSplitter, the first code that touches a Kineto / Chrome trace file (trace files
// come from anywhere: untrusted). Bytes go through a temporary file and ByteSource (gunzipped
// when they start with the gzip magic), as `flopscope import` reads them. Besides not crashing,
// each piece handed to the visitor must be where the splitter says it is: offsets grow, and in
// an uncompressed input the bytes at the offset are the piece itself.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "importer/byte_source.h"
#include "importer/json_event_splitter.h"
#include "importer/testing/fuzz_input_file.h"

namespace flopscope::importer {
namespace {

// Checks each piece against the raw input (when that is what the splitter read) and the order.
class CheckingVisitor final : public JsonTraceVisitor {
 public:
  CheckingVisitor(absl::string_view input, const ByteSource* source)
      : input_(input), source_(source) {}

  absl::Status OnEvent(absl::string_view json, uint64_t offset) override {
    Check(json, offset);
    return absl::OkStatus();
  }
  absl::Status OnMember(absl::string_view key, absl::string_view json, uint64_t offset) override {
    Check(json, offset);
    return absl::OkStatus();
  }

 private:
  void Check(absl::string_view json, uint64_t offset) {
    if (json.empty()) std::abort();
    if (seen_any_ && offset <= last_offset_) std::abort();
    seen_any_ = true;
    last_offset_ = offset;
    if (source_->compressed()) return;
    if (offset > input_.size() || input_.substr(offset, json.size()) != json) std::abort();
  }

  absl::string_view input_;
  const ByteSource* source_;
  bool seen_any_ = false;
  uint64_t last_offset_ = 0;
};

}  // namespace
}  // namespace flopscope::importer

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using flopscope::importer::ByteSource;
  const std::string& path = flopscope::importer::testing::FuzzInputFile::Write(data, size);
  absl::StatusOr<std::unique_ptr<ByteSource>> source = ByteSource::Open(path);
  if (!source.ok()) return 0;
  flopscope::importer::CheckingVisitor visitor(
      absl::string_view(reinterpret_cast<const char*>(data), size), source->get());
  flopscope::importer::JsonEventSplitter splitter(source->get(), &visitor);
  splitter.Run().IgnoreError();
  return 0;
}
