#include "injector/transport/testing/fake_collector.h"

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>

namespace flopscope::transport::testing {

FakeCollector::FakeCollector(std::string socket_path)
    : FakeCollector(std::move(socket_path), Behaviour()) {}

FakeCollector::FakeCollector(std::string socket_path, Behaviour behaviour)
    : socket_path_(std::move(socket_path)), behaviour_(behaviour) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(target(), grpc::InsecureServerCredentials());
  builder.RegisterService(this);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr) throw std::runtime_error("cannot listen on " + target());
}

FakeCollector::~FakeCollector() {
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  server_->Wait();
}

grpc::Status FakeCollector::Stream(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::DownMessage, v1::UpMessage>* stream) {
  v1::UpMessage up;
  if (!stream->Read(&up) || !up.has_hello()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "expected a hello first");
  }
  v1::DownMessage welcome;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    hellos_.push_back(up.hello());
    welcome.mutable_welcome()->set_committed_seq(committed_seq_);
    welcome.mutable_welcome()->set_daemon_version("fake");
    changed_.notify_all();
  }
  if (!stream->Write(welcome)) return grpc::Status::OK;
  while (stream->Read(&up)) {
    std::vector<v1::DownMessage> replies;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const v1::Control& control : controls_to_send_) {
        v1::DownMessage down;
        *down.mutable_control() = control;
        replies.push_back(down);
      }
      controls_to_send_.clear();
      if (up.has_control_reply()) {
        control_replies_.push_back(up.control_reply());
        changed_.notify_all();
      } else if (up.has_batch()) {
        const v1::Batch& batch = up.batch();
        received_records_ += batch.ranges_size() + batch.kernels_size();
        if (behaviour_.keep) received_.push_back(batch);
        changed_.notify_all();
        if (batch.seq() == behaviour_.reject_seq) {
          behaviour_.reject_seq = 0;
          context->AddTrailingMetadata("flopscope-rejected-seq", std::to_string(batch.seq()));
          return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "rejected by the fake");
        }
        if (batch.seq() == behaviour_.hang_up_at_seq) {
          behaviour_.hang_up_at_seq = 0;
          return grpc::Status(grpc::StatusCode::UNAVAILABLE, "hung up by the fake");
        }
        if (behaviour_.ack && batch.seq() > committed_seq_) {
          committed_seq_ = batch.seq();
          if (behaviour_.keep) committed_.push_back(batch);
        }
        if (behaviour_.ack) {
          v1::DownMessage ack;
          ack.mutable_ack()->set_committed_seq(committed_seq_);
          replies.push_back(ack);
        }
      }
    }
    for (const v1::DownMessage& reply : replies) {
      if (!stream->Write(reply)) return grpc::Status::OK;
    }
  }
  return grpc::Status::OK;
}

std::vector<v1::Batch> FakeCollector::received() {
  std::lock_guard<std::mutex> lock(mutex_);
  return received_;
}

std::vector<v1::Batch> FakeCollector::committed() {
  std::lock_guard<std::mutex> lock(mutex_);
  return committed_;
}

std::vector<v1::SessionHello> FakeCollector::hellos() {
  std::lock_guard<std::mutex> lock(mutex_);
  return hellos_;
}

std::vector<v1::ControlReply> FakeCollector::control_replies() {
  std::lock_guard<std::mutex> lock(mutex_);
  return control_replies_;
}

uint64_t FakeCollector::received_records() {
  std::lock_guard<std::mutex> lock(mutex_);
  return received_records_;
}

uint64_t FakeCollector::committed_seq() {
  std::lock_guard<std::mutex> lock(mutex_);
  return committed_seq_;
}

bool FakeCollector::WaitForCommitted(size_t count, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] { return committed_.size() >= count; });
}

bool FakeCollector::WaitForControlReplies(size_t count, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] { return control_replies_.size() >= count; });
}

void FakeCollector::QueueControl(const v1::Control& control) {
  std::lock_guard<std::mutex> lock(mutex_);
  controls_to_send_.push_back(control);
}

TempDir::TempDir() {
  char pattern[] = "/tmp/flopscope-test-XXXXXX";
  if (mkdtemp(pattern) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace flopscope::transport::testing
