#include "client/text/jobs_view.h"

#include "absl/strings/str_split.h"
#include "client/testing/json_parse_for_test.h"
#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

flopscope::v1::ListJobsResponse TwoJobs() {
  flopscope::v1::ListJobsResponse jobs;
  auto* first = jobs.add_jobs();
  first->set_job_id("demo");
  first->set_ranks(2);
  first->set_connected_sessions(1);
  first->set_range_events(1234);
  first->set_kernels(0);
  first->set_lost_records(5);
  first->set_rejected_batches(3);
  first->set_rejected_records(120);
  first->set_first_seen_ns(1'714'564'800'000'000'000);
  first->set_last_seen_ns(1'714'564'803'000'000'000);  // 2024-05-01 12:00:03 UTC
  auto* second = jobs.add_jobs();
  second->set_job_id("train-20240501-120000");
  second->set_ranks(8);
  return jobs;
}

TEST(RenderJobsTextTest, RecordsWaitingInSpoolsAreSaidApartFromTheLost) {
  flopscope::v1::ListJobsResponse jobs = TwoJobs();
  jobs.mutable_jobs(1)->set_lost_records(2);
  jobs.mutable_jobs(1)->set_spooled_records(685842);
  const std::string text = RenderJobsText(jobs, absl::UTCTimeZone());
  EXPECT_NE(text.find("train-20240501-120000: 685842 records wait in spool files the daemon is "
                      "delivering: not lost"),
            std::string::npos)
      << text;
  const std::string json = RenderJobsJson(jobs);
  EXPECT_NE(json.find("\"spooled\": 685842"), std::string::npos) << json;
}

TEST(RenderJobsTextTest, RunsKeptApartFromTheJobAreNamed) {
  flopscope::v1::ListJobsResponse jobs = TwoJobs();
  jobs.mutable_jobs(0)->add_kept_apart("demo@alice");
  const std::string text = RenderJobsText(jobs, absl::UTCTimeZone());
  EXPECT_NE(text.find("demo: another user's run named this job id too; it is kept apart as job "
                      "demo@alice"),
            std::string::npos)
      << text;
  const std::string json = RenderJobsJson(jobs);
  EXPECT_NE(json.find("\"kept_apart\": [\n        \"demo@alice\"\n      ]"), std::string::npos)
      << json;
}

TEST(RenderJobsTextTest, OneAlignedLinePerJob) {
  const std::string text = RenderJobsText(TwoJobs(), absl::UTCTimeZone());
  const std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 5u) << text;  // header, rule, two jobs, one rejection line
  EXPECT_EQ(lines[0].substr(0, 3), "job");
  for (const char* column :
       {"ranks", "connected", "ranges", "kernels", "lost", "rejected", "last seen"}) {
    EXPECT_NE(lines[0].find(column), std::string::npos) << column;
  }
  EXPECT_EQ(lines[2].substr(0, 4), "demo");
  EXPECT_NE(lines[2].find("1234"), std::string::npos);
  EXPECT_TRUE(lines[2].ends_with("2024-05-01 12:00:03")) << lines[2];
  EXPECT_TRUE(lines[3].ends_with("-")) << lines[3];  // never seen: unknown time
  // Beside the producers' 5 lost records, the daemon's own count of what it refused.
  EXPECT_EQ(lines[0].find("rejected") + 8, lines[2].find(" 120 ") + 4) << lines[2];
  EXPECT_EQ(lines[4],
            "demo: rejected by daemon: 3 batches / 120 records (rules: flopscope report demo)");
  // Right-aligned figures end in the same column as their header.
  EXPECT_EQ(lines[0].find("ranks") + 5, lines[2].find("2  ") + 1);
}

TEST(RenderJobsTextTest, NoJobsGivesAHint) {
  EXPECT_NE(RenderJobsText({}, absl::UTCTimeZone()).find("flopscope run"), std::string::npos);
}

TEST(RenderJobsJsonTest, ListsEveryJobWithItsCounts) {
  absl::StatusOr<std::map<std::string, std::string>> flat =
      testing::FlattenJson(RenderJobsJson(TwoJobs()));
  if (absl::IsUnavailable(flat.status())) GTEST_SKIP() << flat.status();
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_EQ(flat->at("jobs#"), "2");
  EXPECT_EQ(flat->at("jobs[0].job"), "\"demo\"");
  EXPECT_EQ(flat->at("jobs[0].ranks"), "2");
  EXPECT_EQ(flat->at("jobs[0].connected"), "1");
  EXPECT_EQ(flat->at("jobs[0].ranges"), "1234");
  EXPECT_EQ(flat->at("jobs[0].lost"), "5");
  EXPECT_EQ(flat->at("jobs[0].rejected_batches"), "3");
  EXPECT_EQ(flat->at("jobs[0].rejected_records"), "120");
  EXPECT_EQ(flat->at("jobs[1].rejected_batches"), "0");
  EXPECT_EQ(flat->at("jobs[0].last_seen_ns"), "1714564803000000000");
  EXPECT_EQ(flat->at("jobs[1].job"), "\"train-20240501-120000\"");
}

}  // namespace
}  // namespace flopscope::client
