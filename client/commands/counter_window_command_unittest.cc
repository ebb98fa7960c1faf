// `flopscope profile`: the request built from the options, the printed answers, and the command
// (in-process and as the built binary) against a fake Profiling service.

#include "client/commands/counter_window_command.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "client/testing/process_runner.h"
#include "flopscope/v1/profiling.grpc.pb.h"
#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

using flopscope::v1::CounterWindowAnswer;
using flopscope::v1::OpenCounterWindowRequest;
using flopscope::v1::OpenCounterWindowResponse;
using testing::ProcessResult;
using testing::RunProcess;

CounterWindowOptions ValidOptions() {
  CounterWindowOptions options;
  options.job_id = "train-1";
  options.steps = 2;
  return options;
}

CounterWindowAnswer* AddAnswer(OpenCounterWindowResponse& response, int rank, bool accepted,
                               const std::string& message, const std::string& session = "") {
  CounterWindowAnswer* answer = response.add_answers();
  answer->set_rank(rank);
  answer->set_accepted(accepted);
  answer->set_message(message);
  answer->set_session_id(session.empty() ? absl::StrCat("s", rank) : session);
  return answer;
}

TEST(BuildCounterWindowRequestTest, CarriesTheOptions) {
  CounterWindowOptions options = ValidOptions();
  options.ranks = {3, 1};
  options.metric_set = "cheap";
  options.timeout_ms = 750;
  absl::StatusOr<OpenCounterWindowRequest> request = BuildCounterWindowRequest(options);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->job_id(), "train-1");
  ASSERT_EQ(request->ranks_size(), 2);
  EXPECT_EQ(request->ranks(0), 3);
  EXPECT_EQ(request->ranks(1), 1);
  EXPECT_EQ(request->steps(), 2u);
  EXPECT_EQ(request->metric_set(), "cheap");
  EXPECT_EQ(request->timeout_ms(), 750u);
}

TEST(BuildCounterWindowRequestTest, DefaultsAskEveryRankWithTheProcessSet) {
  absl::StatusOr<OpenCounterWindowRequest> request = BuildCounterWindowRequest(ValidOptions());
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_TRUE(request->ranks().empty());
  EXPECT_EQ(request->metric_set(), "");
  EXPECT_EQ(request->timeout_ms(), 5000u);
}

TEST(BuildCounterWindowRequestTest, RefusesWhatTheUserTypedWrong) {
  struct Case {
    CounterWindowOptions options;
    std::string expected;
  };
  std::vector<Case> cases;
  cases.push_back({ValidOptions(), "job '../x'"});
  cases.back().options.job_id = "../x";
  cases.push_back({ValidOptions(), "--count N is required"});
  cases.back().options.steps = 0;
  cases.push_back({ValidOptions(), "--steps 2 is now --count 2"});
  cases.back().options.old_steps = "2";
  cases.push_back({ValidOptions(), "--rank -2: ranks start at 0"});
  cases.back().options.ranks = {0, -2};
  cases.push_back({ValidOptions(), "--set 'all' is not known"});
  cases.back().options.metric_set = "all";
  cases.push_back({ValidOptions(), "--timeout-ms must be 1 or more"});
  cases.back().options.timeout_ms = 0;
  for (const Case& c : cases) {
    absl::StatusOr<OpenCounterWindowRequest> request = BuildCounterWindowRequest(c.options);
    EXPECT_TRUE(absl::IsInvalidArgument(request.status())) << c.expected;
    EXPECT_TRUE(absl::StrContains(request.status().message(), c.expected))
        << request.status().message();
  }
}

TEST(RenderCounterWindowAnswersTest, OneAlignedLinePerRankThenTheSummary) {
  OpenCounterWindowResponse response;
  AddAnswer(response, 0, true, "counting the next 2 steps");
  AddAnswer(response, 1, false, "no CUDA device in this process");
  AddAnswer(response, 12, false, "no reply within 5000 ms");
  EXPECT_EQ(RenderCounterWindowAnswers(response),
            "rank 0   accepted  counting the next 2 steps\n"
            "rank 1   refused   no CUDA device in this process\n"
            "rank 12  refused   no reply within 5000 ms\n"
            "1 of 3 ranks accepted\n");
}

TEST(RenderCounterWindowAnswersTest, ARankWithTwoProcessesNamesTheirSessions) {
  OpenCounterWindowResponse response;
  AddAnswer(response, 0, true, "", "abc");
  AddAnswer(response, 0, false, "busy", "def");
  EXPECT_EQ(RenderCounterWindowAnswers(response),
            "rank 0 (session abc)  accepted\n"
            "rank 0 (session def)  refused   busy\n"
            "1 of 1 rank accepted\n");
  EXPECT_EQ(AcceptedRankCount(response), 1);
}

// An in-process stand-in for the daemon's Profiling service: answers with `response` (or
// `error` when set) and keeps the last request.
class FakeProfilingServer final : public flopscope::v1::Profiling::Service {
 public:
  FakeProfilingServer(OpenCounterWindowResponse response, grpc::Status error = grpc::Status::OK)
      : response_(std::move(response)), error_(std::move(error)) {
    std::string pattern = absl::StrCat(::testing::TempDir(), "/fake-profiling-XXXXXX");
    if (mkdtemp(pattern.data()) == nullptr) return;
    directory_ = pattern;
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + directory_ + "/fs.sock", grpc::InsecureServerCredentials());
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~FakeProfilingServer() override {
    if (server_ != nullptr) server_->Shutdown();
    std::error_code ignored;
    if (!directory_.empty()) std::filesystem::remove_all(directory_, ignored);
  }

  std::string socket() const { return directory_ + "/fs.sock"; }
  bool serving() const { return server_ != nullptr; }

  grpc::Status OpenCounterWindow(grpc::ServerContext*, const OpenCounterWindowRequest* request,
                                 OpenCounterWindowResponse* response) override {
    absl::MutexLock lock(&mu_);
    last_request_ = *request;
    if (!error_.ok()) return error_;
    *response = response_;
    return grpc::Status::OK;
  }

  OpenCounterWindowRequest last_request() {
    absl::MutexLock lock(&mu_);
    return last_request_;
  }

 private:
  const OpenCounterWindowResponse response_;
  const grpc::Status error_;
  std::string directory_;
  std::unique_ptr<grpc::Server> server_;
  absl::Mutex mu_;  // gRPC's handler thread writes what the test thread reads
  OpenCounterWindowRequest last_request_ ABSL_GUARDED_BY(mu_);
};

TEST(CounterWindowCommandTest, PrintsTheAnswersAndSucceedsWhenOneRankAccepted) {
  OpenCounterWindowResponse canned;
  AddAnswer(canned, 0, true, "counting");
  AddAnswer(canned, 1, false, "no GPU");
  FakeProfilingServer server(canned);
  ASSERT_TRUE(server.serving());
  CounterWindowOptions options = ValidOptions();
  options.socket = server.socket();
  options.ranks = {0, 1};
  options.metric_set = "full";
  std::ostringstream out;
  absl::StatusOr<int> exit_code = CounterWindowCommand(options, out);
  ASSERT_TRUE(exit_code.ok()) << exit_code.status();
  EXPECT_EQ(*exit_code, 0);
  EXPECT_EQ(out.str(),
            "rank 0  accepted  counting\n"
            "rank 1  refused   no GPU\n"
            "1 of 2 ranks accepted\n");
  const OpenCounterWindowRequest seen = server.last_request();
  EXPECT_EQ(seen.job_id(), "train-1");
  EXPECT_EQ(seen.ranks_size(), 2);
  EXPECT_EQ(seen.steps(), 2u);
  EXPECT_EQ(seen.metric_set(), "full");
}

TEST(CounterWindowCommandTest, ExitsWithOneWhenNoRankAccepted) {
  OpenCounterWindowResponse canned;
  AddAnswer(canned, 0, false, "counter windows are not implemented by this injector yet");
  FakeProfilingServer server(canned);
  CounterWindowOptions options = ValidOptions();
  options.socket = server.socket();
  std::ostringstream out;
  absl::StatusOr<int> exit_code = CounterWindowCommand(options, out);
  ASSERT_TRUE(exit_code.ok()) << exit_code.status();
  EXPECT_EQ(*exit_code, 1);
  EXPECT_TRUE(absl::StrContains(out.str(), "0 of 1 rank accepted")) << out.str();
}

TEST(CounterWindowCommandTest, TheDaemonsErrorsComeBackAsTheyAre) {
  FakeProfilingServer server({}, grpc::Status(grpc::StatusCode::NOT_FOUND, "job 'x' not found"));
  CounterWindowOptions options = ValidOptions();
  options.socket = server.socket();
  std::ostringstream out;
  absl::StatusOr<int> exit_code = CounterWindowCommand(options, out);
  EXPECT_TRUE(absl::IsNotFound(exit_code.status())) << exit_code.status();
  EXPECT_EQ(exit_code.status().message(), "job 'x' not found");
  EXPECT_EQ(out.str(), "");
}

TEST(CounterWindowCommandTest, ANoDaemonSaysWhereItLooked) {
  CounterWindowOptions options = ValidOptions();
  options.socket = absl::StrCat(::testing::TempDir(), "/nobody-", getpid(), ".sock");
  std::ostringstream out;
  absl::StatusOr<int> exit_code = CounterWindowCommand(options, out);
  EXPECT_TRUE(absl::IsUnavailable(exit_code.status())) << exit_code.status();
  EXPECT_TRUE(absl::StrContains(exit_code.status().message(), "cannot reach flopscoped"))
      << exit_code.status();
}

// The built binary: exit statuses and what reaches the terminal.
ProcessResult Flopscope(std::vector<std::string> args) {
  args.insert(args.begin(), FLOPSCOPE_CLI_PATH);
  return RunProcess(args, {{"FLOPSCOPE_SOCKET", testing::kUnset}});
}

TEST(CounterWindowCliTest, UsageErrorsExitWithTwo) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"profile", "job"},                                // no --count
           {"profile", "job", "--count", "0"},                // out of range
           {"profile", "job", "--count", "2", "--set", "x"},  // unknown set
           {"profile", "job", "--count", "2", "--rank", "-1"},
           {"profile", "--count", "2"},  // no job
           {"profile", "../job", "--count", "2", "--socket", "/nonexistent/fs.sock"},
           {"profile", "job", "--steps", "2"}}) {  // the old form
    const ProcessResult result = Flopscope(args);
    EXPECT_EQ(result.exit_code, 2) << absl::StrJoin(args, " ") << ": " << result.err;
  }
}

TEST(CounterWindowCliTest, TheOldStepsFormIsRefusedWithTheFix) {
  const ProcessResult old = Flopscope({"profile", "job", "--steps", "3"});
  EXPECT_EQ(old.exit_code, 2) << old.err;
  EXPECT_TRUE(absl::StrContains(old.err, "--steps 3 is now --count 3")) << old.err;
}

TEST(CounterWindowCliTest, AnswersArePrintedAndTheExitSaysWhetherAnyAccepted) {
  OpenCounterWindowResponse canned;
  AddAnswer(canned, 0, true, "counting the next 2 steps");
  FakeProfilingServer server(canned);
  const ProcessResult ok =
      Flopscope({"profile", "train-1", "--count", "2", "--socket", server.socket()});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(ok.out, "rank 0  accepted  counting the next 2 steps\n1 of 1 rank accepted\n");

  const ProcessResult nobody =
      Flopscope({"profile", "train-1", "--count", "2", "--socket", server.socket() + ".missing"});
  EXPECT_EQ(nobody.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(nobody.err, "flopscope profile: cannot reach flopscoped"))
      << nobody.err;
}

}  // namespace
}  // namespace flopscope::client
