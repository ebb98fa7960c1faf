#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "flopscope/v1/query.grpc.pb.h"

namespace flopscope::client::testing {

// An in-process stand-in for flopscoped's Query service on a unix socket in a temp directory, so
// client tests do not depend on the daemon's build. It answers ListJobs with `jobs`, GetReport
// with `report` for its job id (and the daemon's NOT_FOUND message for any other job).
class FakeQueryServer {
 public:
  FakeQueryServer(flopscope::v1::ListJobsResponse jobs, flopscope::v1::Report report);
  ~FakeQueryServer();

  // The socket path it listens on (empty if it failed to start).
  const std::string& socket() const { return socket_; }
  // The ranks asked for in the last GetReport.
  std::vector<int> last_requested_ranks() const;
  // Every GetReport ("report") and GetRankReports ("rank-reports") request, in arrival order,
  // as "<rpc> <step times|no step times>".
  std::vector<std::string> step_times_asked() const;

 private:
  class Service;

  std::string directory_;
  std::string socket_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace flopscope::client::testing
