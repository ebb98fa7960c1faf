#include "importer/collector_sender.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace flopscope::importer {
namespace {

constexpr int kMaxMessageBytes = 64 << 20;

absl::StatusCode ToAbslCode(grpc::StatusCode code) {
  return static_cast<absl::StatusCode>(static_cast<int>(code));
}

}  // namespace

CollectorSender::CollectorSender(std::string target,
                                 std::shared_ptr<grpc::ChannelCredentials> credentials,
                                 absl::Duration timeout)
    : target_(std::move(target)) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxSendMessageSize(kMaxMessageBytes);
  channel_ = grpc::CreateCustomChannel(target_, std::move(credentials), arguments);
  stub_ = v1::Collector::NewStub(channel_);
  context_.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

CollectorSender::~CollectorSender() {
  if (stream_ != nullptr && !finished_) {
    context_.TryCancel();
    stream_->Finish().ok();  // reaps the call; the status no longer matters
  }
}

absl::StatusOr<std::unique_ptr<CollectorSender>> CollectorSender::Connect(
    const std::string& target, std::shared_ptr<grpc::ChannelCredentials> credentials,
    const v1::SessionHello& hello, absl::Duration timeout) {
  std::unique_ptr<CollectorSender> sender(
      new CollectorSender(target, std::move(credentials), timeout));
  if (absl::Status s = sender->Start(hello); !s.ok()) return s;
  return sender;
}

absl::Status CollectorSender::Start(const v1::SessionHello& hello) {
  stream_ = stub_->Stream(&context_);
  v1::UpMessage up;
  *up.mutable_hello() = hello;
  if (!stream_->Write(up)) return Broken("sending the hello");
  v1::DownMessage down;
  if (!stream_->Read(&down)) return Broken("waiting for the welcome");
  if (!down.has_welcome()) {
    return absl::InternalError(absl::StrCat("the daemon at ", target_,
                                            " answered the hello with something else than a "
                                            "Welcome"));
  }
  committed_seq_ = down.welcome().committed_seq();
  return absl::OkStatus();
}

absl::Status CollectorSender::Send(const v1::Batch& batch) {
  v1::UpMessage up;
  *up.mutable_batch() = batch;
  if (!stream_->Write(up)) return Broken(absl::StrCat("sending batch ", batch.seq()));
  v1::DownMessage down;
  // Control messages (counter windows) mean nothing to an import; wait for the ack.
  while (true) {
    if (!stream_->Read(&down))
      return Broken(absl::StrCat("waiting for the ack of batch ", batch.seq()));
    if (down.has_ack()) break;
  }
  if (down.ack().committed_seq() < batch.seq()) {
    return absl::InternalError(absl::StrCat(
        "the daemon acknowledged seq ", down.ack().committed_seq(), " after batch ", batch.seq()));
  }
  committed_seq_ = down.ack().committed_seq();
  return absl::OkStatus();
}

absl::Status CollectorSender::Finish() {
  if (finished_) return absl::OkStatus();
  finished_ = true;
  stream_->WritesDone();
  const grpc::Status status = stream_->Finish();
  if (status.ok()) return absl::OkStatus();
  return absl::Status(ToAbslCode(status.error_code()),
                      absl::StrCat("the daemon at ", target_, ": ", status.error_message()));
}

absl::Status CollectorSender::Broken(absl::string_view while_doing) {
  finished_ = true;
  const grpc::Status status = stream_->Finish();
  const absl::StatusCode code =
      status.ok() ? absl::StatusCode::kUnavailable : ToAbslCode(status.error_code());
  const std::string& message = status.error_message();
  if (code == absl::StatusCode::kUnavailable &&
      (message.empty() || absl::StrContains(absl::AsciiStrToLower(message), "connect"))) {
    return absl::UnavailableError(
        absl::StrCat("cannot reach flopscoped at ", target_, " (", message,
                     "): is the daemon running? Start it with `flopscoped`, or pass --socket"));
  }
  if (code == absl::StatusCode::kDeadlineExceeded) {
    return absl::DeadlineExceededError(
        absl::StrCat("the daemon at ", target_, " stopped answering while ", while_doing));
  }
  return absl::Status(code, absl::StrCat("the daemon at ", target_, " refused the import while ",
                                         while_doing, ": ", message));
}

}  // namespace flopscope::importer
