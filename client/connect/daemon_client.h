#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/tls/tls_files.h"
#include "flopscope/v1/profiling.grpc.pb.h"
#include "flopscope/v1/query.grpc.pb.h"

namespace flopscope::client {

// The one way the client talks to flopscoped: every Query and Profiling RPC goes through here and
// comes back as absl::StatusOr with a message fit for the user. A daemon that is not running gives
// UNAVAILABLE "cannot reach flopscoped at unix:/path (not running? start it with: flopscoped
// --socket /path)"; the daemon's own errors (NOT_FOUND "job 'x' not found", ...) pass through
// with their code and message.
class DaemonClient {
 public:
  // `socket_or_target`: a socket path (relative ones are made absolute) or a gRPC target.
  explicit DaemonClient(const std::string& socket_or_target,
                        absl::Duration rpc_timeout = absl::Seconds(30))
      : DaemonClient(socket_or_target, std::nullopt, rpc_timeout) {}
  // With `tls`: a daemon's TCP port (`--server`, client/connect/daemon_address.h) over mutual TLS
  // with these files; nullopt: no channel security (a unix socket).
  DaemonClient(const std::string& socket_or_target, const std::optional<tls::TlsPem>& tls,
               absl::Duration rpc_timeout = absl::Seconds(30));

  // OK when a connection to the daemon is established within `timeout` (`flopscope run` uses it
  // to warn early; it never waits long, since the job should not be delayed).
  absl::Status CheckReachable(absl::Duration timeout) const;

  absl::StatusOr<flopscope::v1::ListJobsResponse> ListJobs() const;
  absl::StatusOr<flopscope::v1::ListRanksResponse> ListRanks(const std::string& job_id) const;
  absl::StatusOr<flopscope::v1::Report> GetReport(
      const flopscope::v1::ReportRequest& request) const;
  // Every rank's own report in one call (`flopscope ranks`), each handed to `on_rank` as it
  // arrives, in rank order. The RPC timeout covers the whole stream.
  absl::Status GetRankReports(const flopscope::v1::ReportRequest& request,
                              const std::function<void(flopscope::v1::RankReport)>& on_rank) const;
  // The raw timeline of a job (`flopscope export`), each chunk handed to `on_chunk` as it
  // arrives; `on_chunk` returning an error stops the stream and is returned. The deadline is
  // `trace_timeout` for the whole stream (an export of millions of records takes a while).
  absl::Status GetTrace(
      const flopscope::v1::TraceRequest& request,
      const std::function<absl::Status(const flopscope::v1::TraceChunk&)>& on_chunk,
      absl::Duration trace_timeout = absl::Minutes(30)) const;
  // `flopscope where`: every rank's latest snapshot of its open ranges.
  absl::StatusOr<flopscope::v1::OpenRangesResponse> GetOpenRanges(const std::string& job_id) const;
  // `flopscope prune`: the daemon deletes (or, with dry_run, lists) whole jobs.
  absl::StatusOr<flopscope::v1::PruneResponse> PruneJobs(
      const flopscope::v1::PruneRequest& request) const;
  // Waits for the daemon's own wait for the processes' replies (request.timeout_ms) on top of
  // the usual RPC timeout.
  absl::StatusOr<flopscope::v1::OpenCounterWindowResponse> OpenCounterWindow(
      const flopscope::v1::OpenCounterWindowRequest& request) const;

  // Socket paths made absolute (and a "unix:" prefix dropped), so messages, the daemon started
  // from their suggestion and the job's FLOPSCOPE_SOCKET name the same file wherever they are
  // used. Anything else with a ':' is a gRPC target ("dns:host:port", "unix-abstract:name") and
  // is kept as given.
  static std::string NormalizeSocket(const std::string& given);

  const std::string& socket() const { return socket_; }
  const std::string& target() const { return target_; }
  // The status a call gets when nothing answers at the target.
  absl::Status UnreachableError() const;

 private:
  absl::Status Translate(const grpc::Status& status, const char* method,
                         absl::Duration timeout) const;
  absl::Status Translate(const grpc::Status& status, const char* method) const {
    return Translate(status, method, rpc_timeout_);
  }
  void PrepareContext(grpc::ClientContext& context, absl::Duration timeout) const;
  void PrepareContext(grpc::ClientContext& context) const { PrepareContext(context, rpc_timeout_); }
  // A unary Query call (`rpc`: the stub's method) within the RPC timeout, its status translated.
  template <typename Request, typename Response>
  absl::StatusOr<Response> Unary(grpc::Status (flopscope::v1::Query::Stub::*rpc)(
                                     grpc::ClientContext*, const Request&, Response*),
                                 const Request& request, const char* method) const {
    grpc::ClientContext context;
    PrepareContext(context);
    Response response;
    if (absl::Status s = Translate(((*stub_).*rpc)(&context, request, &response), method);
        !s.ok()) {
      return s;
    }
    return response;
  }

  std::string socket_;  // as the user would pass it to `flopscoped --socket`
  std::string target_;  // as gRPC reads it
  bool tls_ = false;    // mutual TLS to a --server
  absl::Duration rpc_timeout_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<flopscope::v1::Query::Stub> stub_;
  std::unique_ptr<flopscope::v1::Profiling::Stub> profiling_stub_;
};

}  // namespace flopscope::client
