#include "client/run/ld_preload.h"

#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

constexpr char kInjector[] = "/opt/flopscope/lib/libflopscope_inject.so";

TEST(PrependToLdPreloadTest, UsesTheInjectorAloneWhenNothingIsPreloaded) {
  EXPECT_EQ(PrependToLdPreload("", kInjector).value(), kInjector);
  EXPECT_EQ(PrependToLdPreload(" : ", kInjector).value(), kInjector);
}

TEST(PrependToLdPreloadTest, PutsTheInjectorBeforeTheUsersLibrariesInOrder) {
  EXPECT_EQ(PrependToLdPreload("/usr/lib/libjemalloc.so", kInjector).value(),
            std::string(kInjector) + ":/usr/lib/libjemalloc.so");
  EXPECT_EQ(PrependToLdPreload("liba.so libb.so:libc.so", kInjector).value(),
            std::string(kInjector) + ":liba.so:libb.so:libc.so");
}

TEST(PrependToLdPreloadTest, NeverLoadsTheInjectorTwice) {
  // A nested `flopscope run` (or a user who preloaded it already) keeps one copy, first.
  EXPECT_EQ(PrependToLdPreload(std::string("liba.so:") + kInjector, kInjector).value(),
            std::string(kInjector) + ":liba.so");
}

TEST(PrependToLdPreloadTest, RejectsAnInjectorPathLdPreloadCannotHold) {
  absl::StatusOr<std::string> with_space = PrependToLdPreload("", "/my libs/inject.so");
  EXPECT_EQ(with_space.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(with_space.status().message().find("/my libs/inject.so"), std::string::npos);
  EXPECT_FALSE(PrependToLdPreload("", "/a:b/inject.so").ok());
  EXPECT_FALSE(PrependToLdPreload("liba.so", "").ok());
}

}  // namespace
}  // namespace flopscope::client
