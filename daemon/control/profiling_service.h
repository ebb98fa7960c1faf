#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/access/access_policy.h"
#include "daemon/catalog/catalog.h"
#include "daemon/ingest/session_registry.h"
#include "flopscope/v1/profiling.grpc.pb.h"

namespace flopscope::daemon {

// Limits of an OpenCounterWindowRequest: kernel replay makes a counted step many times slower,
// and the caller's RPC waits for every reply.
inline constexpr uint32_t kMaxCounterWindowSteps = 1000;
inline constexpr uint32_t kDefaultControlTimeoutMs = 5000;
inline constexpr uint32_t kMaxControlTimeoutMs = 60000;

// INVALID_ARGUMENT naming the first problem of `request` (job id, steps, metric set, ranks,
// timeout); OK when it can be served.
absl::Status ValidateCounterWindowRequest(const v1::OpenCounterWindowRequest& request);

// `flopscope profile`: opens counter windows in running processes (proto: service Profiling).
// Sends Control{counter_window} down the collector stream of every selected, connected session of
// the job, waits up to timeout_ms for every ControlReply, and answers one CounterWindowAnswer per
// session (normally one per rank) plus one per listed rank that is not connected, in rank order.
// NOT_FOUND for a job this daemon never saw, FAILED_PRECONDITION when no selected rank is
// connected. Each request and its outcome are logged at info level.
//
// Thread-safe: the Catalog and the SessionRegistry are; requests share nothing else.
class ProfilingService final : public v1::Profiling::Service {
 public:
  ProfilingService(Catalog* catalog, SessionRegistry* sessions)
      : catalog_(catalog), sessions_(sessions) {}

  grpc::Status OpenCounterWindow(grpc::ServerContext* context,
                                 const v1::OpenCounterWindowRequest* request,
                                 v1::OpenCounterWindowResponse* response) override;

  // Who may open counter windows in which job (daemon/access/access_policy.h; required: set before
  // serving).
  void SetAccessControl(const AccessControl* access) { access_ = access; }

  // The same for callers in this process.
  absl::StatusOr<v1::OpenCounterWindowResponse> Open(const v1::OpenCounterWindowRequest& request);

 private:
  // A selected session with the control sent to it, or the answer it already has.
  struct Target {
    SessionKey session;
    bool connected = false;                   // else `answer` says why not, and is final
    std::shared_ptr<PendingControl> pending;  // set once the control went down the stream
    v1::CounterWindowAnswer answer;
  };

  // The targets of `request` before anything is sent: every live session of the selected ranks,
  // and a final answer for each listed rank that is not connected.
  absl::StatusOr<std::vector<Target>> SelectTargets(const v1::OpenCounterWindowRequest& request);
  void SendAll(const v1::OpenCounterWindowRequest& request, std::vector<Target>& targets);
  void AwaitAll(absl::Time deadline, uint32_t timeout_ms, std::vector<Target>& targets);

  Catalog* catalog_;
  SessionRegistry* sessions_;
  const AccessControl* access_ = nullptr;
};

}  // namespace flopscope::daemon
