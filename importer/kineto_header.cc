#include "importer/kineto_header.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "importer/json_fields.h"
#include "importer/python_repr.h"
#include "importer/text_sanitizer.h"

namespace flopscope::importer {
namespace {

absl::Status MemberError(uint64_t offset, absl::string_view key, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("offset ", offset, ": ", key, ": ", problem));
}

uint32_t SignedToU32(std::optional<int64_t> value) {
  return value.has_value() && *value >= 0 && *value <= UINT32_MAX ? static_cast<uint32_t>(*value)
                                                                  : 0;
}

}  // namespace

absl::Status KinetoHeader::Read(absl::string_view key, absl::string_view json, uint64_t offset) {
  padded_.resize(json.size() + simdjson::SIMDJSON_PADDING);
  std::memcpy(padded_.data(), json.data(), json.size());
  simdjson::dom::element value;
  if (const simdjson::error_code error =
          parser_.parse(padded_.data(), json.size(), false).get(value);
      error != simdjson::SUCCESS) {
    return MemberError(offset, key, absl::StrCat("invalid JSON: ", simdjson::error_message(error)));
  }
  if (key == "schemaVersion") {
    if (const std::optional<int64_t> version = IntValue(value)) {
      recording_->format_version = absl::StrCat(*version);
    }
  } else if (key == "baseTimeNanoseconds") {
    recording_->base_time_ns = IntValue(value);
  } else if (key == "host_name" || key == "hostname") {
    std::string_view host;
    if (value.get_string().get(host) == simdjson::SUCCESS) {
      recording_->host = CleanText(AbslView(host), kMaxNameBytes);
    }
  } else if (key == "deviceProperties" || key == "distributedInfo") {
    simdjson::dom::element unwrapped;
    if (absl::Status s = Unwrap(key, value, offset, &unwrapped); !s.ok()) return s;
    return key == "deviceProperties" ? ReadDevices(unwrapped, offset)
                                     : ReadDistributedInfo(unwrapped, offset);
  }
  return absl::OkStatus();
}

absl::Status KinetoHeader::Unwrap(absl::string_view key, simdjson::dom::element value,
                                  uint64_t offset, simdjson::dom::element* unwrapped) {
  std::string_view text;
  if (value.get_string().get(text) != simdjson::SUCCESS) {
    *unwrapped = value;
    return absl::OkStatus();
  }
  inner_json_.assign(text);
  if (inner_parser_.parse(inner_json_).get(*unwrapped) == simdjson::SUCCESS) {
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> json = PythonReprToJson(AbslView(text));
  if (!json.ok()) {
    return MemberError(
        offset, key,
        absl::StrCat("a string that is neither JSON nor a Python repr: ", json.status().message()));
  }
  inner_json_ = *std::move(json);
  if (const simdjson::error_code error = inner_parser_.parse(inner_json_).get(*unwrapped);
      error != simdjson::SUCCESS) {
    return MemberError(
        offset, key,
        absl::StrCat("cannot read the Python repr it holds: ", simdjson::error_message(error)));
  }
  return absl::OkStatus();
}

absl::Status KinetoHeader::ReadDevices(simdjson::dom::element devices, uint64_t offset) {
  simdjson::dom::array list;
  if (devices.get_array().get(list) != simdjson::SUCCESS) {
    return MemberError(offset, "deviceProperties", "not a list of devices");
  }
  for (simdjson::dom::element entry : list) {
    if (!entry.is_object()) {
      return MemberError(offset, "deviceProperties", "an entry is not an object");
    }
    v1::Device device;
    device.set_index(SignedToU32(IntField(entry, "id")));
    device.set_name(CleanText(StringField(entry, "name"), kMaxNameBytes));
    const std::optional<int64_t> memory = IntField(entry, "totalGlobalMem");
    device.set_memory_bytes(memory.has_value() && *memory > 0 ? static_cast<uint64_t>(*memory) : 0);
    device.set_sm_count(SignedToU32(IntField(entry, "numSms")));
    device.set_sm_clock_khz(SignedToU32(IntField(entry, "clockRate")));  // cudaDeviceProp: kHz
    const std::optional<int64_t> major = IntField(entry, "computeMajor");
    const std::optional<int64_t> minor = IntField(entry, "computeMinor");
    if (major.has_value())
      device.set_compute_capability(SignedToU32(*major * 10 + minor.value_or(0)));
    recording_->devices.push_back(std::move(device));
  }
  return absl::OkStatus();
}

absl::Status KinetoHeader::ReadDistributedInfo(simdjson::dom::element info, uint64_t offset) {
  if (!info.is_object()) return MemberError(offset, "distributedInfo", "not an object");
  if (const std::optional<int64_t> rank = IntField(info, "rank")) {
    if (*rank < 0 || *rank > INT32_MAX) {
      return MemberError(offset, "distributedInfo", absl::StrCat("rank ", *rank, " is invalid"));
    }
    recording_->rank = static_cast<int32_t>(*rank);
  }
  if (const std::optional<int64_t> world = IntField(info, "world_size")) {
    if (*world > 0 && *world <= INT32_MAX) recording_->world_size = static_cast<int32_t>(*world);
  }
  return absl::OkStatus();
}

}  // namespace flopscope::importer
