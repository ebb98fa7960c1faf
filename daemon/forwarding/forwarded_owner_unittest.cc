// A forwarded stream's owner (kForwardedOwnerKey, AccessControl::IdentifyWriter) end to end on
// an aggregator served in-process: root (what a node daemon on the same host runs as) makes the
// job the named owner's, and then writes with that owner's rights only.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>

#include "common/sqlite/sqlite_db.h"
#include "daemon/access/access_policy.h"
#include "daemon/server/daemon_server.h"
#include "daemon/store/data_layout.h"
#include "daemon/testing/test_batches.h"
#include "daemon/testing/test_daemon.h"
#include "daemon/testing/test_temp_dir.h"
#include "flopscope/v1/collector.grpc.pb.h"

namespace flopscope::daemon {
namespace {

class ForwardedOwnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<DaemonServer>> server =
        DaemonServer::Start(fixtures::TestDaemonOptions(dir_));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  // A session of `job` with one batch, its stream saying its job belongs to `owner` (none:
  // no such metadata); the stream's final status.
  grpc::Status Forward(const std::string& job, std::optional<std::string> owner) {
    auto stub = v1::Collector::NewStub(
        grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    if (owner) context.AddMetadata(kForwardedOwnerKey, *owner);
    auto stream = stub->Stream(&context);
    v1::UpMessage up;
    *up.mutable_hello() = fixtures::Hello(job, 0, "session-" + job + owner.value_or(""));
    v1::DownMessage down;
    if (stream->Write(up) && stream->Read(&down) && down.has_welcome()) {
      up.Clear();
      up.mutable_batch()->set_seq(1);
      stream->Write(up);
      stream->Read(&down);  // the ack
    }
    stream->WritesDone();
    while (stream->Read(&down)) {
    }
    return stream->Finish();
  }

  // The owner the catalog recorded for `job`, -1 for none.
  int64_t OwnerOf(const std::string& job) {
    absl::StatusOr<std::unique_ptr<SqliteDb>> db =
        SqliteDb::OpenExisting(CatalogPath(dir_.File("data")));
    EXPECT_TRUE(db.ok()) << db.status();
    if (!db.ok()) return -1;
    auto query = (*db)->Prepare("SELECT uid FROM job_owners WHERE job_id = ?");
    EXPECT_TRUE(query.ok()) << query.status();
    if (!query.ok()) return -1;
    (*query)->BindText(1, job);
    absl::StatusOr<bool> row = (*query)->Step();
    const int64_t uid = row.ok() && *row ? (*query)->ColumnInt(0) : -1;
    (*query)->Reset();
    return uid;
  }

  fixtures::ScopedTempDir dir_;
  std::unique_ptr<DaemonServer> server_;
};

TEST_F(ForwardedOwnerTest, RootForwardsAsTheJobsOwnerAndOnlyWithTheirRights) {
  if (geteuid() != 0) GTEST_SKIP() << "the forwarding caller here is root (a node daemon)";
  const grpc::Status forwarded = Forward("fw", "4321");
  ASSERT_TRUE(forwarded.ok()) << forwarded.error_message();
  EXPECT_EQ(OwnerOf("fw"), 4321);
  // Another node forwarding the same job for the same owner writes on.
  EXPECT_TRUE(Forward("fw", "4321").ok());
  // A forward into that job for another owner does not write into it: the writer has the
  // owner's rights, and its run is kept apart under an id that is its own (campaign row 4k:
  // before, the node retried a refused batch for ever and nothing was counted).
  const grpc::Status other = Forward("fw", "1111");
  EXPECT_TRUE(other.ok()) << other.error_message();
  EXPECT_EQ(OwnerOf("fw"), 4321);
  EXPECT_EQ(OwnerOf("fw@" + OwnerTagOfUid(1111)), 1111);
  // Without the metadata root writes as itself, as before.
  ASSERT_TRUE(Forward("mine", std::nullopt).ok());
  EXPECT_EQ(OwnerOf("mine"), 0);
}

TEST_F(ForwardedOwnerTest, OnlyANodeOrRootMayNameAnotherOwner) {
  const std::string me = std::to_string(geteuid());
  EXPECT_TRUE(Forward("self", me).ok());  // naming oneself is always allowed
  EXPECT_EQ(OwnerOf("self"), static_cast<int64_t>(geteuid()));
  const grpc::Status garbage = Forward("bad", "not-a-uid");
  EXPECT_EQ(garbage.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << garbage.error_message();
  EXPECT_EQ(OwnerOf("bad"), -1);  // refused before anything was claimed
  if (geteuid() == 0) return;     // root may name anyone: the test above
  const grpc::Status denied = Forward("theirs", "4321");
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED) << denied.error_message();
  EXPECT_EQ(OwnerOf("theirs"), -1);
}

}  // namespace
}  // namespace flopscope::daemon
