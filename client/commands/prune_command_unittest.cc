// `flopscope prune`: --older-than's parsing, the request, the text of the answer.
#include "client/commands/prune_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "client/text/human_format.h"

namespace flopscope::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(ParseAgeTest, ReadsAWholeNumberAndAUnit) {
  EXPECT_EQ(*ParseAge("90s"), absl::Seconds(90));
  EXPECT_EQ(*ParseAge("30m"), absl::Minutes(30));
  EXPECT_EQ(*ParseAge("12h"), absl::Hours(12));
  EXPECT_EQ(*ParseAge("7d"), absl::Hours(7 * 24));
  EXPECT_EQ(*ParseAge("2w"), absl::Hours(14 * 24));
}

TEST(ParseAgeTest, BadAgesSayTheForm) {
  for (const char* bad : {"", "7", "d", "7x", "-1d", "0h", "1.5d", "7 d", "9999999999w"}) {
    absl::StatusOr<absl::Duration> age = ParseAge(bad);
    ASSERT_FALSE(age.ok()) << bad;
    EXPECT_TRUE(absl::IsInvalidArgument(age.status())) << bad;
    EXPECT_THAT(std::string(age.status().message()), HasSubstr("such as 7d")) << bad;
  }
}

TEST(MakePruneRequestTest, JobsOrAnAgeNotBothNorNeither) {
  PruneOptions options;
  EXPECT_TRUE(absl::IsInvalidArgument(MakePruneRequest(options).status()));
  options.job_ids = {"a", "b"};
  options.older_than = "1d";
  EXPECT_TRUE(absl::IsInvalidArgument(MakePruneRequest(options).status()));
  options.older_than.clear();
  options.dry_run = true;
  absl::StatusOr<v1::PruneRequest> named = MakePruneRequest(options);
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(named->job_ids_size(), 2);
  EXPECT_TRUE(named->dry_run());
  EXPECT_EQ(named->older_than_ns(), 0);
  options.job_ids = {"../x"};
  EXPECT_TRUE(absl::IsInvalidArgument(MakePruneRequest(options).status()));
  options.job_ids.clear();
  options.older_than = "12h";
  absl::StatusOr<v1::PruneRequest> aged = MakePruneRequest(options);
  ASSERT_TRUE(aged.ok()) << aged.status();
  EXPECT_EQ(aged->older_than_ns(), absl::ToInt64Nanoseconds(absl::Hours(12)));
}

v1::PruneResponse Answer() {
  v1::PruneResponse response;
  for (auto [id, bytes] : {std::pair<const char*, uint64_t>{"old-job", 3 << 20},
                           std::pair<const char*, uint64_t>{"older-job", 1536}}) {
    v1::PrunedJob* job = response.add_jobs();
    job->set_job_id(id);
    job->set_bytes(bytes);
    job->set_ranks(2);
    job->set_last_seen_ns(1'700'000'000'000'000'000);
    response.set_bytes(response.bytes() + bytes);
  }
  response.add_kept_running("live\x1b[2J");
  return response;
}

TEST(RenderPruneTextTest, ListsJobsTheirBytesTheTotalAndTheRunningOnesKept) {
  const v1::PruneResponse response = Answer();
  const std::string text = RenderPruneText(response, false, absl::UTCTimeZone());
  EXPECT_THAT(text, HasSubstr(absl::StrCat("pruned 2 job(s), freed ", FormatBytes(response.bytes()),
                                           " (", response.bytes(), " bytes)")));
  EXPECT_THAT(text, HasSubstr("old-job"));
  EXPECT_THAT(text, HasSubstr(absl::StrCat(response.jobs(1).bytes())));
  EXPECT_THAT(text, HasSubstr("2023-11-14 22:13:20"));
  EXPECT_THAT(text, HasSubstr("kept, still running: live"));
  EXPECT_THAT(text, Not(HasSubstr("\x1b")));  // producer text never reaches the terminal raw
  EXPECT_THAT(RenderPruneText(response, true, absl::UTCTimeZone()),
              HasSubstr("would prune 2 job(s), freeing "));
  EXPECT_EQ(RenderPruneText(v1::PruneResponse(), true, absl::UTCTimeZone()),
            "nothing would be pruned\n");
}

}  // namespace
}  // namespace flopscope::client
