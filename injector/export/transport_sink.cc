#include "injector/export/transport_sink.h"

#include <algorithm>

#include "common/version.h"

namespace flopscope::injector {
namespace {

constexpr uint64_t kMaxPendingBytes = 256ull << 20;
constexpr uint32_t kReconnectInitialMs = 100;
constexpr uint32_t kReconnectMaxMs = 5000;

fs_str View(const std::string& text) {
  return fs_str{text.data(), static_cast<uint32_t>(text.size())};
}

}  // namespace

TransportSink::TransportSink(std::string library_path, std::string target, SessionIdentity identity,
                             std::string gpu_status)
    : library_path_(std::move(library_path)),
      target_(std::move(target)),
      identity_(std::move(identity)),
      gpu_status_(std::move(gpu_status)) {}

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
  options.max_pending_bytes = kMaxPendingBytes;
  options.reconnect_initial_ms = kReconnectInitialMs;
  options.reconnect_max_ms = kReconnectMaxMs;
  char message[512] = {};
  transport_ = loader_->api()->create(&options, &hello, message, sizeof message);
  if (transport_ == nullptr) {
    *error = std::string("cannot start the transport to ") + target_ + ": " + message;
    return false;
  }
  return true;
}

void TransportSink::Submit(const fs_batch& batch, uint64_t records) {
  if (!exporter_thread_.Check("TransportSink::Submit")) {
    refused_records_.fetch_add(records, std::memory_order_relaxed);
    return;
  }
  loader_->api()->submit(transport_, &batch);
  submitted_records_.push_back(records);
}

DeliveryOutcome TransportSink::Finish(uint32_t exit_timeout_ms) {
  const uint64_t refused = refused_records_.load(std::memory_order_relaxed);
  if (!exporter_thread_.Check("TransportSink::Finish")) {
    // submitted_records_ belongs to the exporter thread: not read from here.
    DeliveryOutcome outcome;
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
  fs_transport_stats after{};
  api->get_stats(transport_, &after);

  DeliveryOutcome outcome;
  outcome.undelivered_records = after.records_dropped + refused;
  if (!all_acked) {
    // Acks and rejections consume batches in submission order; the rest never arrived.
    const uint64_t settled = after.batches_acked + after.batches_rejected;
    for (size_t i = std::min<size_t>(settled, submitted_records_.size());
         i < submitted_records_.size(); ++i) {
      outcome.undelivered_records += submitted_records_[i];
    }
  }
  if (outcome.undelivered_records > 0) {
    if (refused > 0 && outcome.undelivered_records == refused) {
      outcome.reason = "submitted off the exporter thread (refused)";
    } else if (!reachable && after.batches_acked == 0) {
      outcome.reason = "the daemon was not reachable (is flopscoped running?)";
    } else if (!all_acked) {
      outcome.reason = "no acknowledgement within " + std::to_string(timeout) + " ms";
    } else if (after.batches_rejected > 0) {
      outcome.reason =
          "the daemon rejected " + std::to_string(after.batches_rejected) + " batch(es) as invalid";
    } else {
      outcome.reason = "dropped while the daemon was away (pending queue full)";
    }
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
