#include "client/run/job_id_choice.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/job_id.h"
#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

// 2024-05-01 12:00:03 UTC
const absl::Time kNow = absl::FromUnixSeconds(1714564803);

TEST(GenerateJobIdTest, UsesTheCommandsBasenameAndTheTime) {
  EXPECT_EQ(GenerateJobId("/usr/bin/python3", kNow, absl::UTCTimeZone()),
            "python3-20240501-120003");
  EXPECT_EQ(GenerateJobId("train.sh", kNow, absl::FixedTimeZone(2 * 3600)),
            "train.sh-20240501-140003");
}

TEST(GenerateJobIdTest, TwoRunsInTheSameSecondGetDifferentIds) {
  const int64_t first_pid = 4242;
  const std::string first = GenerateJobId("train.sh", kNow, absl::UTCTimeZone(), first_pid);
  const std::string second = GenerateJobId("train.sh", kNow, absl::UTCTimeZone(), first_pid + 1);
  EXPECT_NE(first, second);
  EXPECT_EQ(first,
            absl::StrCat(GenerateJobId("train.sh", kNow, absl::UTCTimeZone()), "-", first_pid));
  EXPECT_EQ(JobIdProblem(first), "");
  // The longest command still leaves room for the widest pid.
  const std::string longest =
      GenerateJobId(std::string(300, 'x'), kNow, absl::UTCTimeZone(), 4194304);
  EXPECT_EQ(JobIdProblem(longest), "") << longest;
  EXPECT_TRUE(absl::EndsWith(longest, "-4194304")) << longest;
}

TEST(GenerateJobIdTest, AlwaysYieldsAValidJobId) {
  const std::vector<std::string> commands = {"./my prog!",          ".hidden",    "-dash", "/", "",
                                             std::string(300, 'x'), "caf\xc3\xa9"};
  for (const std::string& command : commands) {
    const std::string id = GenerateJobId(command, kNow, absl::UTCTimeZone());
    EXPECT_EQ(JobIdProblem(id), "") << "command '" << command << "' gave '" << id << "'";
    EXPECT_TRUE(id.ends_with("-20240501-120003")) << id;
  }
  EXPECT_EQ(GenerateJobId("./my prog!", kNow, absl::UTCTimeZone()), "my_prog_-20240501-120003");
}

JobIdChoice Choose(const std::optional<std::string>& flag, const Environment& env) {
  absl::StatusOr<JobIdChoice> choice =
      ChooseJobId(flag, env, "/bin/train", kNow, absl::UTCTimeZone());
  EXPECT_TRUE(choice.ok()) << choice.status();
  return choice.value_or(JobIdChoice{});
}

TEST(ChooseJobIdTest, FlagWinsOverEverythingAndIsExported) {
  const Environment env = Environment::FromEntries({"SLURM_JOB_ID=42", "FLOPSCOPE_JOB_ID=env"});
  const JobIdChoice choice = Choose("mine", env);
  EXPECT_EQ(choice.source, JobIdChoice::Source::kFlag);
  EXPECT_EQ(choice.job_id, "mine");
  EXPECT_TRUE(choice.export_to_command);
}

TEST(ChooseJobIdTest, MalformedFlagIsRejected) {
  absl::StatusOr<JobIdChoice> choice =
      ChooseJobId("../etc", Environment(), "train", kNow, absl::UTCTimeZone());
  EXPECT_EQ(choice.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(choice.status().message().find("../etc"), std::string::npos);
}

TEST(ChooseJobIdTest, SchedulerIdsAreLeftToTheInjector) {
  const JobIdChoice slurm = Choose(std::nullopt, Environment::FromEntries({"SLURM_JOB_ID=42"}));
  EXPECT_EQ(slurm.source, JobIdChoice::Source::kEnvironment);
  EXPECT_EQ(slurm.job_id, "42");
  EXPECT_EQ(slurm.variable, "SLURM_JOB_ID");
  EXPECT_FALSE(slurm.export_to_command);

  const JobIdChoice elastic =
      Choose(std::nullopt, Environment::FromEntries({"TORCHELASTIC_RUN_ID=run/7"}));
  EXPECT_EQ(elastic.variable, "TORCHELASTIC_RUN_ID");
  EXPECT_EQ(elastic.job_id, "run_7");  // sanitized as the injector will
}

TEST(ChooseJobIdTest, ExistingFlopscopeJobIdComesFirstAmongVariables) {
  const JobIdChoice choice =
      Choose(std::nullopt, Environment::FromEntries({"SLURM_JOB_ID=42", "FLOPSCOPE_JOB_ID=outer"}));
  EXPECT_EQ(choice.job_id, "outer");
  EXPECT_EQ(choice.variable, "FLOPSCOPE_JOB_ID");
  EXPECT_FALSE(ChooseJobId(std::nullopt, Environment::FromEntries({"FLOPSCOPE_JOB_ID=a/b"}),
                           "train", kNow, absl::UTCTimeZone())
                   .ok());
}

TEST(ChooseJobIdTest, GeneratesWhenNothingNamesTheJob) {
  const JobIdChoice choice = Choose(std::nullopt, Environment::FromEntries({"SLURM_JOB_ID="}));
  EXPECT_EQ(choice.source, JobIdChoice::Source::kGenerated);
  EXPECT_EQ(choice.job_id, "train-20240501-120003");
  EXPECT_TRUE(choice.export_to_command);
}

// Item 8 of issue 14: a second run under a finished job's id is kept apart; ranks of one run that
// start at different times, and restarts while the run goes on, stay in their run.
TEST(NumberRunTest, ANewJobIdIsUsedAsGiven) {
  const RunNumber number = NumberRun("bert", 0, {{"other", false, {0}}, {"bert-2", false, {0}}});
  EXPECT_EQ(number.job_id, "bert");
  EXPECT_EQ(number.notice, "");
}

TEST(NumberRunTest, ASecondRunOfAFinishedJobGetsTheNextRunNumber) {
  const std::vector<HeldRun> finished = {{"bert", false, {0, 1}}};
  const RunNumber second = NumberRun("bert", 1, finished);
  EXPECT_EQ(second.job_id, "bert.run2");
  EXPECT_TRUE(absl::StrContains(second.notice, "this run is job bert.run2")) << second.notice;
  EXPECT_TRUE(absl::StrContains(second.notice, "--job")) << second.notice;
  // Unknown rank (a launcher under flopscope run): the whole job, so a new run too.
  EXPECT_EQ(NumberRun("bert", std::nullopt, finished).job_id, "bert.run2");
  // Every earlier run finished: one above the latest, whatever order the daemon lists them in.
  const std::vector<HeldRun> three = {
      {"bert.run3", false, {0}}, {"bert", false, {0}}, {"bert.run2", false, {0}}};
  EXPECT_EQ(NumberRun("bert", 0, three).job_id, "bert.run4");
}

TEST(NumberRunTest, RanksOfOneRunAndRestartsStayInTheirRun) {
  // Rank 1 starts after rank 0 of the same run finished: the run does not hold rank 1 yet.
  EXPECT_EQ(NumberRun("bert", 1, {{"bert", false, {0}}}).job_id, "bert");
  // Rank 0 restarts while rank 1 still runs: the run is live.
  EXPECT_EQ(NumberRun("bert", 0, {{"bert", true, {0, 1}}}).job_id, "bert");
  // A rank of the second run joins it, live or not, when it does not hold that rank yet.
  const std::vector<HeldRun> second = {{"bert", false, {0, 1}}, {"bert.run2", false, {0}}};
  const RunNumber joined = NumberRun("bert", 1, second);
  EXPECT_EQ(joined.job_id, "bert.run2");
  EXPECT_EQ(joined.notice, "");
  // Ids that only look like runs of the job are not.
  EXPECT_EQ(NumberRun("bert", 0, {{"bert.run02", false, {0}}, {"bert.runx", false, {0}}}).job_id,
            "bert");
}

TEST(NumberRunTest, AnIdTooLongForARunNumberIsMergedAndSaid) {
  const std::string longest(kMaxJobIdLength, 'j');
  const RunNumber number = NumberRun(longest, 0, {{longest, false, {0}}});
  EXPECT_EQ(number.job_id, longest);
  EXPECT_TRUE(absl::StartsWith(number.notice, "warning: ")) << number.notice;
}

TEST(RankFromEnvironmentTest, TheInjectorsOrderAndNothingWhenUnset) {
  EXPECT_EQ(RankFromEnvironment(Environment::FromEntries({"PMI_RANK=3", "RANK=5"})), 5);
  EXPECT_EQ(RankFromEnvironment(Environment::FromEntries({"SLURM_PROCID=2"})), 2);
  EXPECT_EQ(RankFromEnvironment(Environment::FromEntries({})), std::nullopt);
  EXPECT_EQ(RankFromEnvironment(Environment::FromEntries({"RANK=x"})), std::nullopt);
}

}  // namespace
}  // namespace flopscope::client
