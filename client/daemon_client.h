#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "flopscope/v1/query.grpc.pb.h"

namespace flopscope::client {

// The one way the client talks to flopscoped: every Query RPC goes through here and comes back as
// absl::StatusOr with a message fit for the user. A daemon that is not running gives
// UNAVAILABLE "cannot reach flopscoped at unix:/path (not running? start it with: flopscoped
// --socket /path)"; the daemon's own errors (NOT_FOUND "job 'x' not found", ...) pass through
// with their code and message.
class DaemonClient {
 public:
  // `socket_or_target`: a socket path (relative ones are made absolute) or a gRPC target.
  explicit DaemonClient(const std::string& socket_or_target,
                        absl::Duration rpc_timeout = absl::Seconds(30));

  // OK when a connection to the daemon is established within `timeout` (`flopscope run` uses it
  // to warn early; it never waits long, since the job should not be delayed).
  absl::Status CheckReachable(absl::Duration timeout) const;

  absl::StatusOr<flopscope::v1::ListJobsResponse> ListJobs() const;
  absl::StatusOr<flopscope::v1::ListRanksResponse> ListRanks(const std::string& job_id) const;
  absl::StatusOr<flopscope::v1::Report> GetReport(
      const flopscope::v1::ReportRequest& request) const;

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
  absl::Status Translate(const grpc::Status& status, const char* method) const;
  void PrepareContext(grpc::ClientContext& context) const;

  std::string socket_;  // as the user would pass it to `flopscoped --socket`
  std::string target_;  // as gRPC reads it
  absl::Duration rpc_timeout_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<flopscope::v1::Query::Stub> stub_;
};

}  // namespace flopscope::client
