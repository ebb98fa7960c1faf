#include "client/connect/daemon_client.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/endpoint.h"
#include "common/tls/grpc_credentials.h"

namespace flopscope::client {
namespace {

// Reports of large models can be several MB; gRPC's 4 MB default would cut them off.
constexpr int kMaxReceiveBytes = 256 * 1024 * 1024;

absl::StatusCode ToAbslCode(grpc::StatusCode code) {
  // grpc::StatusCode and absl::StatusCode share the canonical numbering.
  return static_cast<absl::StatusCode>(static_cast<int>(code));
}

}  // namespace

std::string DaemonClient::NormalizeSocket(const std::string& given) {
  if (absl::StartsWith(given, "unix:")) return given.substr(std::string_view("unix:").size());
  if (given.empty() || given.find(':') != std::string::npos) return given;
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::absolute(given, error);
  return error ? given : absolute.lexically_normal().string();
}

DaemonClient::DaemonClient(const std::string& socket_or_target,
                           const std::optional<tls::TlsPem>& tls, absl::Duration rpc_timeout)
    : socket_(NormalizeSocket(socket_or_target)),
      target_(GrpcTarget(socket_)),
      tls_(tls.has_value()),
      rpc_timeout_(rpc_timeout) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(kMaxReceiveBytes);
  channel_ = grpc::CreateCustomChannel(target_, tls::ClientCredentials(tls), arguments);
  stub_ = flopscope::v1::Query::NewStub(channel_);
  profiling_stub_ = flopscope::v1::Profiling::NewStub(channel_);
}

absl::Status DaemonClient::UnreachableError() const {
  if (tls_) {
    return absl::UnavailableError(absl::StrCat(
        "cannot reach flopscoped at ", target_,
        " over mutual TLS: not running there (flopscoped --tcp with --tls-*), or the handshake "
        "failed: --tls-ca must be the CA that signed the daemon's certificate (whose names must "
        "include the host you gave), and your --tls-cert must be signed by the daemon's "
        "--tls-ca"));
  }
  if (!absl::StartsWith(socket_, "/")) {
    return absl::UnavailableError(
        absl::StrCat("cannot reach flopscoped at ", target_, " (not running?)"));
  }
  // connect() needs write permission on the socket and search permission on its directories:
  // a daemon that runs but refuses this user is not "not running".
  if (access(socket_.c_str(), W_OK) != 0 && errno == EACCES) {
    return absl::PermissionDeniedError(absl::StrCat(
        "cannot reach flopscoped at ", target_, ": permission denied (uid ", getuid(),
        " may not open that socket or a directory on its path; the node daemon serves every "
        "user at ",
        kNodeSocketPath, ", mode 0666)"));
  }
  return absl::UnavailableError(absl::StrCat("cannot reach flopscoped at ", target_,
                                             " (not running? start it with: flopscoped --socket ",
                                             socket_, ")"));
}

absl::Status DaemonClient::CheckReachable(absl::Duration timeout) const {
  const bool connected = channel_->WaitForConnected(absl::ToChronoTime(absl::Now() + timeout));
  return connected ? absl::OkStatus() : UnreachableError();
}

void DaemonClient::PrepareContext(grpc::ClientContext& context, absl::Duration timeout) const {
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

absl::Status DaemonClient::Translate(const grpc::Status& status, const char* method,
                                     absl::Duration timeout) const {
  switch (status.error_code()) {
    case grpc::StatusCode::OK:
      return absl::OkStatus();
    case grpc::StatusCode::UNAVAILABLE:
      if (tls_) {  // gRPC's words say which side of the handshake failed
        return absl::UnavailableError(
            absl::StrCat(UnreachableError().message(), " (gRPC: ", status.error_message(), ")"));
      }
      return UnreachableError();
    case grpc::StatusCode::UNIMPLEMENTED:
      return absl::UnimplementedError(absl::StrCat("flopscoped at ", target_,
                                                   " does not implement ", method,
                                                   " (is it an older version than this client?)"));
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return absl::DeadlineExceededError(absl::StrCat("flopscoped at ", target_, " did not answer ",
                                                      method, " within ",
                                                      absl::FormatDuration(timeout)));
    default:
      return absl::Status(ToAbslCode(status.error_code()), status.error_message());
  }
}

absl::StatusOr<flopscope::v1::ListJobsResponse> DaemonClient::ListJobs() const {
  return Unary(&flopscope::v1::Query::Stub::ListJobs, flopscope::v1::ListJobsRequest(), "ListJobs");
}

absl::StatusOr<flopscope::v1::ListRanksResponse> DaemonClient::ListRanks(
    const std::string& job_id) const {
  flopscope::v1::ListRanksRequest request;
  request.set_job_id(job_id);
  return Unary(&flopscope::v1::Query::Stub::ListRanks, request, "ListRanks");
}

absl::StatusOr<flopscope::v1::Report> DaemonClient::GetReport(
    const flopscope::v1::ReportRequest& request) const {
  return Unary(&flopscope::v1::Query::Stub::GetReport, request, "GetReport");
}

absl::StatusOr<flopscope::v1::OpenRangesResponse> DaemonClient::GetOpenRanges(
    const std::string& job_id) const {
  flopscope::v1::OpenRangesRequest request;
  request.set_job_id(job_id);
  return Unary(&flopscope::v1::Query::Stub::GetOpenRanges, request, "GetOpenRanges");
}

absl::StatusOr<flopscope::v1::PruneResponse> DaemonClient::PruneJobs(
    const flopscope::v1::PruneRequest& request) const {
  return Unary(&flopscope::v1::Query::Stub::PruneJobs, request, "PruneJobs");
}

absl::Status DaemonClient::GetRankReports(
    const flopscope::v1::ReportRequest& request,
    const std::function<void(flopscope::v1::RankReport)>& on_rank) const {
  grpc::ClientContext context;
  PrepareContext(context);
  std::unique_ptr<grpc::ClientReader<flopscope::v1::RankReport>> reader =
      stub_->GetRankReports(&context, request);
  flopscope::v1::RankReport answer;
  while (reader->Read(&answer)) on_rank(std::move(answer));
  return Translate(reader->Finish(), "GetRankReports");
}

absl::Status DaemonClient::GetTrace(
    const flopscope::v1::TraceRequest& request,
    const std::function<absl::Status(const flopscope::v1::TraceChunk&)>& on_chunk,
    absl::Duration trace_timeout) const {
  grpc::ClientContext context;
  PrepareContext(context, trace_timeout);
  std::unique_ptr<grpc::ClientReader<flopscope::v1::TraceChunk>> reader =
      stub_->GetTrace(&context, request);
  flopscope::v1::TraceChunk chunk;
  absl::Status written;
  while (written.ok() && reader->Read(&chunk)) written = on_chunk(chunk);
  if (!written.ok()) {
    context.TryCancel();
    reader->Finish().ok();  // cancelled: the writer's error is the one to report
    return written;
  }
  return Translate(reader->Finish(), "GetTrace", trace_timeout);
}

absl::StatusOr<flopscope::v1::OpenCounterWindowResponse> DaemonClient::OpenCounterWindow(
    const flopscope::v1::OpenCounterWindowRequest& request) const {
  // The daemon waits up to timeout_ms (0: its 5 s default) for the processes before answering.
  const uint32_t daemon_wait_ms = request.timeout_ms() == 0 ? 5000 : request.timeout_ms();
  const absl::Duration timeout = rpc_timeout_ + absl::Milliseconds(daemon_wait_ms);
  grpc::ClientContext context;
  PrepareContext(context, timeout);
  flopscope::v1::OpenCounterWindowResponse response;
  absl::Status status = Translate(profiling_stub_->OpenCounterWindow(&context, request, &response),
                                  "OpenCounterWindow", timeout);
  if (!status.ok()) return status;
  return response;
}

}  // namespace flopscope::client
