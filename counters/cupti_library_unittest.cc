#include "counters/cupti_library.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "counters/profiler_host_api.h"

namespace flopscope::counters {
namespace {

TEST(CuptiLibraryTest, FindsTheToolkitCopyWithoutAPath) {
  CuptiLibrary library;
  std::string error;
  ASSERT_TRUE(OpenCuptiLibrary("", &library, &error)) << error;
  EXPECT_NE(library.handle, nullptr);
  EXPECT_GE(library.version, kMinimumCuptiVersion);
  struct stat st;
  EXPECT_EQ(stat(library.path.c_str(), &st), 0) << "not a file: " << library.path;
}

TEST(CuptiLibraryTest, OpeningTwiceGivesTheSameHandle) {
  CuptiLibrary first, second;
  std::string error;
  ASSERT_TRUE(OpenCuptiLibrary("", &first, &error)) << error;
  ASSERT_TRUE(OpenCuptiLibrary(first.path, &second, &error)) << error;
  EXPECT_EQ(first.handle, second.handle);
  EXPECT_EQ(first.version, second.version);
}

TEST(CuptiLibraryTest, AnExplicitPathIsTheOnlyOneTried) {
  CuptiLibrary library;
  std::string error;
  EXPECT_FALSE(OpenCuptiLibrary("/nonexistent/libcupti.so.13", &library, &error));
  EXPECT_NE(error.find("/nonexistent/libcupti.so.13"), std::string::npos) << error;
  EXPECT_NE(error.find("FLOPSCOPE_CUPTI_PATH"), std::string::npos) << error;
  EXPECT_EQ(library.handle, nullptr);
}

TEST(CuptiLibraryTest, ALibraryThatIsNotCuptiIsRefused) {
  CuptiLibrary library;
  std::string error;
  EXPECT_FALSE(OpenCuptiLibrary("libm.so.6", &library, &error));
  EXPECT_NE(error.find("cuptiGetVersion"), std::string::npos) << error;
}

TEST(ProfilerHostApiTest, ResolvesEveryEntry) {
  CuptiLibrary library;
  std::string error;
  ASSERT_TRUE(OpenCuptiLibrary("", &library, &error)) << error;
  ProfilerHostApi api;
  ASSERT_TRUE(ResolveProfilerHostApi(library.handle, &api, &error)) << error;
  EXPECT_TRUE(api.Complete());
  EXPECT_EQ(api.ResultText(CUPTI_ERROR_INVALID_PARAMETER), "CUPTI_ERROR_INVALID_PARAMETER");
}

TEST(ProfilerHostApiTest, NamesWhatALibraryLacks) {
  ProfilerHostApi api;
  std::string error;
  EXPECT_FALSE(ResolveProfilerHostApi(nullptr, &api, &error));
  EXPECT_FALSE(error.empty());
  CuptiLibrary libm;
  libm.handle = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(libm.handle, nullptr);
  EXPECT_FALSE(ResolveProfilerHostApi(libm.handle, &api, &error));
  EXPECT_NE(error.find("cuptiProfilerHostInitialize"), std::string::npos) << error;
  EXPECT_FALSE(api.Complete());
  EXPECT_EQ(api.ResultText(CUPTI_ERROR_UNKNOWN), "CUPTI error 999");  // no table, no names
}

TEST(ProfilerHostApiTest, LoadSaysWhichLibraryAnswered) {
  ProfilerHostApi api;
  CuptiLibrary library;
  std::string error;
  ASSERT_TRUE(LoadProfilerHostApi("", &api, &library, &error)) << error;
  EXPECT_TRUE(api.Complete());
  EXPECT_FALSE(library.path.empty());
  EXPECT_FALSE(LoadProfilerHostApi("/nonexistent/libcupti.so", &api, &error));
}

}  // namespace
}  // namespace flopscope::counters
