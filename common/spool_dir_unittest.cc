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

// A spool waits in the folder of the daemon it was meant for: one folder per address, whatever
// its spelling, and a name that stays inside the directory.
TEST(SpoolDestinationNameTest, OneAddressOneFolderWhateverItsSpelling) {
  const std::string name = SpoolDestinationName("unix:/run/user/1000/flopscope.sock");
  EXPECT_EQ(SpoolDestinationName("/run/user/1000/flopscope.sock"), name);
  EXPECT_EQ(SpoolDestinationName("unix:///run/user//1000/flopscope.sock"), name);
  EXPECT_EQ(SpoolDestinationName("/run/user/1000/./flopscope.sock"), name);
  EXPECT_NE(name.find("flopscope.sock"), std::string::npos) << name;  // `ls` shows which
}

TEST(SpoolDestinationNameTest, TwoAddressesNeverShareAFolder) {
  EXPECT_NE(SpoolDestinationName("unix:/tmp/a/flopscope.sock"),
            SpoolDestinationName("unix:/tmp/b/flopscope.sock"));
  // The same readable tail, told apart by the hash of the whole address.
  const std::string tail(60, 'x');
  EXPECT_NE(SpoolDestinationName("/a/" + tail), SpoolDestinationName("/b/" + tail));
  EXPECT_NE(SpoolDestinationName("node1:7000"), SpoolDestinationName("node2:7000"));
}

TEST(SpoolDestinationNameTest, TheNameIsOneBoundedFileName) {
  for (const std::string& target :
       {std::string("unix:/"), std::string(""), std::string("../../etc/passwd"),
        std::string("unix:/tmp/\xe2\x9c\x93 space/..//x.sock"), std::string(5000, '/')}) {
    const std::string name = SpoolDestinationName(target);
    EXPECT_LE(name.size(), 80u) << name;
    EXPECT_EQ(name.rfind("to-", 0), 0u) << name;
    EXPECT_EQ(
        name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                               "._-"),
        std::string::npos)
        << name;
  }
}

}  // namespace
}  // namespace flopscope
