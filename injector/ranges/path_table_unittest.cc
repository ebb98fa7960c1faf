#include "injector/ranges/path_table.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <vector>

#include "injector/ranges/domain_registry.h"
#include "injector/records/string_table.h"

namespace flopscope::injector {
namespace {

TEST(PathTableTest, InternsByParentDomainAndName) {
  DomainRegistry domains;
  const Domain* other = domains.Create("other");
  PathTable table;
  const uint64_t model = table.Intern(0, domains.Default(), "Model");
  const uint64_t layer = table.Intern(model, domains.Default(), "layer.0");
  EXPECT_EQ(model, 1u);
  EXPECT_EQ(layer, 2u);
  EXPECT_EQ(table.Intern(0, domains.Default(), "Model"), model);
  EXPECT_NE(table.Intern(0, other, "Model"), model);                  // same name, other domain
  EXPECT_NE(table.Intern(layer, domains.Default(), "Model"), model);  // same name, other parent
  EXPECT_EQ(table.size(), 4u);
}

TEST(PathTableTest, EachDefinitionIsHandedOutOnce) {
  DomainRegistry domains;
  PathTable table;
  const uint64_t a = table.Intern(0, domains.Default(), "a");
  table.Intern(a, domains.Default(), "b");
  std::vector<PathDefinition> first;
  table.TakeNewDefinitions(&first);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[1].parent_id, a);
  EXPECT_EQ(first[1].name, "b");
  EXPECT_EQ(first[1].domain, domains.Default());
  table.Intern(0, domains.Default(), "a");  // known: no new definition
  std::vector<PathDefinition> second;
  table.TakeNewDefinitions(&second);
  EXPECT_TRUE(second.empty());
}

TEST(PathTableTest, FullTableReturnsZero) {
  DomainRegistry domains;
  PathTable table(/*max_paths=*/2);
  EXPECT_NE(table.Intern(0, domains.Default(), "a"), 0u);
  EXPECT_NE(table.Intern(0, domains.Default(), "b"), 0u);
  EXPECT_EQ(table.Intern(0, domains.Default(), "c"), 0u);
  EXPECT_EQ(table.Intern(0, domains.Default(), "a"), 1u);  // known paths still resolve
}

TEST(PathTableTest, NamesAreRepairedAndBounded) {
  DomainRegistry domains;
  PathTable table;
  table.Intern(0, domains.Default(), "bad\xFF");
  table.Intern(0, domains.Default(), "");
  table.Intern(0, domains.Default(), std::string(5000, 'x'));
  std::vector<PathDefinition> defs;
  table.TakeNewDefinitions(&defs);
  ASSERT_EQ(defs.size(), 3u);
  EXPECT_EQ(defs[0].name, "bad\xEF\xBF\xBD");
  EXPECT_EQ(defs[1].name, "(unnamed)");
  EXPECT_EQ(defs[2].name.size(), PathTable::kMaxNameBytes);
}

TEST(PathTableTest, ConcurrentInterningAgreesOnIds) {
  DomainRegistry domains;
  PathTable table;
  constexpr int kThreads = 4;
  std::vector<std::vector<uint64_t>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        seen[t].push_back(table.Intern(0, domains.Default(), "n" + std::to_string(i)));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 1; t < kThreads; ++t) EXPECT_EQ(seen[t], seen[0]);
  EXPECT_EQ(std::set<uint64_t>(seen[0].begin(), seen[0].end()).size(), 200u);
  std::vector<PathDefinition> defs;
  table.TakeNewDefinitions(&defs);
  EXPECT_EQ(defs.size(), 200u);
}

TEST(StringTableTest, InternsKernelNamesOnce) {
  StringTable table(/*max_strings=*/2);
  EXPECT_EQ(table.Intern("_Z4gemmv"), 1u);
  EXPECT_EQ(table.Intern("_Z4relu"), 2u);
  EXPECT_EQ(table.Intern("_Z4gemmv"), 1u);
  EXPECT_EQ(table.Intern("_Z5other"), 0u);  // full
  std::vector<StringDefinition> defs;
  table.TakeNewDefinitions(&defs);
  ASSERT_EQ(defs.size(), 2u);
  EXPECT_EQ(defs[0].value, "_Z4gemmv");
}

TEST(DomainRegistryTest, SameNameSameDomainAndFlopscopeIsMarked) {
  DomainRegistry domains;
  const Domain* a = domains.Create("flopscope");
  EXPECT_EQ(domains.Create("flopscope"), a);
  EXPECT_TRUE(a->is_flopscope);
  EXPECT_FALSE(domains.Create("Flopscope")->is_flopscope);
  EXPECT_FALSE(domains.Default()->is_flopscope);
  EXPECT_EQ(domains.Default()->name, "");
  const RegisteredString* s = domains.Register(a, "step");
  EXPECT_EQ(domains.Register(a, "step"), s);
  EXPECT_NE(domains.Register(domains.Default(), "step"), s);
  EXPECT_EQ(s->value, "step");
}

}  // namespace
}  // namespace flopscope::injector
