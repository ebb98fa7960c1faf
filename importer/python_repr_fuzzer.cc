// Fuzzes PythonReprToJson, which rewrites the repr() text a Kineto trace may hold in its
// `deviceProperties` and `distributedInfo` members: trace files come from anywhere, so the text
// is untrusted. Besides not crashing, the header's promise is checked: text that is already
// JSON comes out equal. So when a result is JSON (simdjson parses it), converting it again must
// give it back unchanged.

#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "importer/python_repr.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view repr(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<std::string> json = flopscope::importer::PythonReprToJson(repr);
  if (!json.ok()) {
    if (!absl::IsInvalidArgument(json.status())) std::abort();
    return 0;
  }
  static simdjson::dom::parser* parser = new simdjson::dom::parser();
  if (parser->parse(json->data(), json->size()).error() != simdjson::SUCCESS) return 0;
  const absl::StatusOr<std::string> again = flopscope::importer::PythonReprToJson(*json);
  if (!again.ok() || *again != *json) std::abort();
  return 0;
}
