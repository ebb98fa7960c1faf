// The spool directory: a directory that is not ours and 0700 is refused, naming its owner and
// mode, and a private fallback of ours is used instead (one per user, found again by the next
// process), so that no one else can switch a user's spool off by making its directory first.
#include "common/spool_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "common/testing/scoped_temp_dir.h"

namespace flopscope {
namespace {

std::string Prefix(const std::string& root) {
  return root + "/flopscope-spool-" + std::to_string(geteuid()) + "-";
}

bool PrivateDirectoryOfOurs(const std::string& dir) {
  struct stat st;
  return lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
         (st.st_mode & 0777) == 0700;
}

TEST(SpoolDirTest, OurOwnPrivateDirectoryIsUsedAsItIs) {
  ScopedTempDir dir;
  const std::string wanted = dir.path() + "/spool";
  const SpoolDirectoryChoice choice = ChooseSpoolDirectory(wanted, dir.path());
  EXPECT_EQ(choice.dir, wanted);
  EXPECT_TRUE(choice.warning.empty()) << choice.warning;
  EXPECT_TRUE(PrivateDirectoryOfOurs(wanted));
}

TEST(SpoolDirTest, ADirectoryOpenToOthersIsRefusedLoudlyAndAFallbackOfOursIsUsed) {
  ScopedTempDir dir;
  const std::string wanted = dir.path() + "/squatted";
  ASSERT_EQ(mkdir(wanted.c_str(), 0700), 0);
  ASSERT_EQ(chmod(wanted.c_str(), 0777), 0);
  const SpoolDirectoryChoice choice = ChooseSpoolDirectory(wanted, dir.path());
  ASSERT_EQ(choice.dir.rfind(Prefix(dir.path()), 0), 0u) << choice.dir;
  EXPECT_TRUE(PrivateDirectoryOfOurs(choice.dir));
  EXPECT_NE(choice.warning.find("spool directory refused: " + wanted), std::string::npos)
      << choice.warning;
  EXPECT_NE(choice.warning.find("mode 0777"), std::string::npos) << choice.warning;
  EXPECT_NE(choice.warning.find("spooling to " + choice.dir + " instead"), std::string::npos)
      << choice.warning;
  // The next process finds the same fallback; another user's look-alike is passed over.
  const std::string lookalike = Prefix(dir.path()) + "000000";
  ASSERT_EQ(mkdir(lookalike.c_str(), 0700), 0);
  ASSERT_EQ(chmod(lookalike.c_str(), 0755), 0);  // not private: as good as someone else's
  EXPECT_EQ(ChooseSpoolDirectory(wanted, dir.path()).dir, choice.dir);
}

TEST(SpoolDirTest, AnotherUsersDirectoryIsRefusedNamingItsOwner) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another uid";
  ScopedTempDir dir;
  const std::string wanted = dir.path() + "/flopscope-spool-0";
  ASSERT_EQ(mkdir(wanted.c_str(), 0700), 0);
  ASSERT_EQ(chown(wanted.c_str(), 65534, 65534), 0);
  const SpoolDirectoryChoice choice = ChooseSpoolDirectory(wanted, dir.path());
  EXPECT_TRUE(PrivateDirectoryOfOurs(choice.dir)) << choice.dir;
  EXPECT_NE(choice.warning.find("a directory of uid 65534, mode 0700"), std::string::npos)
      << choice.warning;
}

TEST(SpoolDirTest, WithoutAFallbackTheSpoolIsOffAndTheReasonSaysWhy) {
  ScopedTempDir dir;
  const std::string wanted = dir.path() + "/squatted";
  ASSERT_EQ(mkdir(wanted.c_str(), 0777), 0);
  ASSERT_EQ(chmod(wanted.c_str(), 0777), 0);
  const SpoolDirectoryChoice choice = ChooseSpoolDirectory(wanted, dir.path() + "/missing");
  EXPECT_TRUE(choice.dir.empty());
  EXPECT_NE(choice.error.find(wanted + " is not a private directory"), std::string::npos)
      << choice.error;
  EXPECT_NE(choice.error.find("no private fallback"), std::string::npos) << choice.error;
  EXPECT_EQ(choice.warning.rfind("SPOOL OFF: ", 0), 0u) << choice.warning;
}

}  // namespace
}  // namespace flopscope
