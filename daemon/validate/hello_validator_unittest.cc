#include "daemon/validate/hello_validator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "daemon/testing/test_batches.h"

namespace flopscope::daemon {
namespace {

using ::testing::HasSubstr;

v1::SessionHello GoodHello() { return fixtures::Hello("bert-42", 3, "node-1-4245-1700000000"); }

TEST(HelloValidatorTest, AcceptsAPlausibleHello) { EXPECT_TRUE(ValidateHello(GoodHello()).ok()); }

TEST(HelloValidatorTest, ProtocolVersionMustMatch) {
  v1::SessionHello hello = GoodHello();
  hello.set_protocol_version(kProtocolVersion + 1);
  absl::Status status = ValidateHello(hello);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("protocol version 2 is not supported"));
}

TEST(HelloValidatorTest, JobIdIsCheckedBeforeItBecomesADirectory) {
  for (const char* job : {"", "..", "a/b", "-x"}) {
    v1::SessionHello hello = GoodHello();
    hello.set_job_id(job);
    absl::Status status = ValidateHello(hello);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << job;
    EXPECT_THAT(status.message(), HasSubstr("job id")) << job;
  }
}

TEST(HelloValidatorTest, RankMustNotBeNegative) {
  v1::SessionHello hello = GoodHello();
  hello.set_rank(-1);
  absl::Status status = ValidateHello(hello);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("rank -1 is negative"));
}

TEST(HelloValidatorTest, TextFieldsAreChecked) {
  v1::SessionHello hello = GoodHello();
  hello.set_session_id("");
  EXPECT_THAT(ValidateHello(hello).message(), HasSubstr("session_id is empty"));

  hello = GoodHello();
  hello.set_session_id(std::string(kMaxSessionIdBytes + 1, 's'));
  EXPECT_THAT(ValidateHello(hello).message(), HasSubstr("session_id is 257 bytes long"));

  hello = GoodHello();
  hello.set_command(std::string("python\0x", 8));
  EXPECT_THAT(ValidateHello(hello).message(), HasSubstr("command holds a NUL byte"));

  hello = GoodHello();
  hello.mutable_devices(0)->set_name("\xff");
  EXPECT_THAT(ValidateHello(hello).message(), HasSubstr("device text is not valid UTF-8"));
}

}  // namespace
}  // namespace flopscope::daemon
