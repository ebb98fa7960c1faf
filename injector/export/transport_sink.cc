#include "injector/export/transport_sink.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "common/version.h"
#include "injector/export/abi_text.h"
#include "injector/warn.h"

namespace flopscope::injector {
namespace {

constexpr uint32_t kReconnectInitialMs = 100;
constexpr uint32_t kReconnectMaxMs = 5000;

// "a by cause1, b by cause2": the parts that are not zero.
std::string ByCause(const std::vector<std::pair<uint64_t, std::string>>& parts) {
  std::string text;
  for (const auto& [count, cause] : parts) {
    if (count == 0) continue;
    if (!text.empty()) text += ", ";
    text += std::to_string(count) + " " + cause;
  }
  return text;
}

}  // namespace

TransportSink::TransportSink(std::string library_path, std::string target, SessionIdentity identity,
                             std::string gpu_status, Limits limits)
    : library_path_(std::move(library_path)),
      target_(std::move(target)),
      identity_(std::move(identity)),
      gpu_status_(std::move(gpu_status)),
      limits_(std::move(limits)) {}

TransportSink::~TransportSink() {
  // Off the exporter thread the transport is leaked rather than destroyed from the wrong thread.
  if (transport_ != nullptr && exporter_thread_.Check("~TransportSink")) {
    loader_->api()->destroy(transport_);
  }
}

bool TransportSink::Open(std::string* error) {
  exporter_thread_.Bind();  // first: every later call must come from this thread
  loader_ = TransportLoader::Load(library_path_, error);
  if (loader_ == nullptr) return false;
  const std::string version = kVersion;
  fs_hello hello{};
  hello.session_id = View(identity_.session_id);
  hello.job_id = View(identity_.job_id);
  hello.host = View(identity_.host);
  hello.injector_version = View(version);
  hello.command = View(identity_.command);
  hello.gpu_status = View(gpu_status_);
  hello.rank = identity_.rank;
  hello.local_rank = identity_.local_rank;
  hello.world_size = identity_.world_size;
  const ParallelLayout& layout = identity_.layout;
  hello.layout = fs_layout{layout.tp_size, layout.pp_size, layout.dp_size,     layout.tp_rank,
                           layout.pp_rank, layout.dp_rank, View(layout.source)};
  hello.pid = identity_.pid;
  hello.start_time_ns = identity_.start_time_ns;
  fs_transport_options options{};
  options.target = View(target_);
  options.max_pending_bytes = limits_.max_pending_bytes;
  options.spool_dir = View(limits_.spool_dir);
  options.max_spool_bytes = limits_.max_spool_bytes;
  options.reconnect_initial_ms = kReconnectInitialMs;
  options.reconnect_max_ms = kReconnectMaxMs;
  char message[512] = {};
  transport_ = loader_->api()->create(&options, &hello, message, sizeof message);
  if (transport_ == nullptr) {
    *error = std::string("cannot start the transport to ") + target_ + ": " + message;
    return false;
  }
  if (message[0] != '\0') Warn(message);  // working, with a warning (no spool)
  spool_off_ = limits_.spool_dir.empty()                      ? limits_.spool_off_reason
               : std::strncmp(message, "no spool: ", 10) == 0 ? std::string(message + 10)
                                                              : std::string();
  return true;
}

void TransportSink::Submit(const fs_batch& batch, uint64_t records) {
  if (!exporter_thread_.Check("TransportSink::Submit")) {
    refused_records_.fetch_add(records, std::memory_order_relaxed);
    return;
  }
  loader_->api()->submit(transport_, &batch);
}

DeliveryOutcome TransportSink::Finish(uint32_t exit_timeout_ms) {
  const uint64_t refused = refused_records_.load(std::memory_order_relaxed);
  DeliveryOutcome outcome;
  if (!exporter_thread_.Check("TransportSink::Finish")) {
    outcome.undelivered_records = refused;
    outcome.reason = "the transport was called off the exporter thread";
    return outcome;
  }
  const fs_transport_api* api = loader_->api();
  fs_transport_stats before{};
  api->get_stats(transport_, &before);
  const bool reachable = before.connected != 0 || before.batches_acked > 0;
  const uint32_t timeout =
      reachable ? exit_timeout_ms : std::min(exit_timeout_ms, kUnreachableExitTimeoutMs);
  const bool all_acked = api->flush(transport_, timeout) != 0;
  if (!all_acked) {
    char path[1024] = {};
    api->spool(transport_, path, sizeof path);
    outcome.spool_path = path;
  }
  // Each record is in exactly one of: acknowledged, dropped (by cause), pending in memory,
  // pending in the spool file. Pending in memory at this point is lost with the process.
  fs_transport_stats after{};
  api->get_stats(transport_, &after);
  outcome.spooled_records = after.records_spooled;
  outcome.stored_as_job_id.assign(after.stored_as_job_id,
                                  strnlen(after.stored_as_job_id, sizeof after.stored_as_job_id));
  const uint64_t unacked = after.records_pending - after.records_spooled;
  outcome.undelivered_records = after.records_dropped + unacked + refused;
  const std::string refusal(after.refusal, strnlen(after.refusal, sizeof after.refusal));
  if (outcome.spooled_records > 0 && !refusal.empty()) {
    outcome.spool_path += " (the daemon refused them: " + refusal + ")";
  }
  if (outcome.undelivered_records > 0) {
    // The spool's part, by its real cause: off (and why) or full.
    const std::string spool = spool_off_.empty() ? "the spool was full (FLOPSCOPE_SPOOL_MB)"
                                                 : "there was no spool: " + spool_off_;
    const std::string unacked_cause =
        !refusal.empty() ? "unacknowledged: the daemon refused them (" + refusal + ") and " + spool
        : !reachable && after.batches_acked == 0
            ? "unacknowledged: the daemon was not reachable (is flopscoped running?) and " + spool
            : "unacknowledged within " + std::to_string(timeout) + " ms and " + spool;
    outcome.reason = ByCause({{after.dropped_unreachable,
                               "dropped while the daemon was away or slow (memory and spool full)"},
                              {after.dropped_rejected, "rejected by the daemon as invalid"},
                              {unacked, unacked_cause},
                              {refused, "submitted off the exporter thread (refused)"}});
  }
  api->destroy(transport_);
  transport_ = nullptr;
  return outcome;
}

bool TransportSink::PollControl(fs_control* out) {
  if (!exporter_thread_.Check("TransportSink::PollControl")) return false;
  return loader_->api()->poll_control(transport_, out) != 0;
}

void TransportSink::ReplyControl(uint64_t id, bool accepted, std::string_view message) {
  if (!exporter_thread_.Check("TransportSink::ReplyControl")) return;
  loader_->api()->reply_control(transport_, id, accepted ? 1 : 0,
                                fs_str{message.data(), static_cast<uint32_t>(message.size())});
}

}  // namespace flopscope::injector
