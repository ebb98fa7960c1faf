#include "injector/cupti/graph_node_table.h"

#include <gtest/gtest.h>

namespace flopscope::injector::cupti {
namespace {

TEST(GraphNodeTableTest, RemembersTheRangeOfACreatedNode) {
  GraphNodeTable table;
  table.NodeCreated(100, RangeContext{4, 40});
  RangeContext found;
  ASSERT_TRUE(table.Find(100, &found));
  EXPECT_EQ(found.path_id, 4u);
  EXPECT_EQ(found.instance_id, 40u);
  EXPECT_FALSE(table.Find(101, &found));
}

TEST(GraphNodeTableTest, AClonedNodeInheritsItsOriginalsRange) {
  GraphNodeTable table;
  table.NodeCreated(100, RangeContext{4, 40});
  table.NodeCloned(500, 100);  // e.g. instantiation copies node 100 into the executable graph
  table.NodeCloned(501, 999);  // a clone of a node created with no range open
  RangeContext found;
  ASSERT_TRUE(table.Find(500, &found));
  EXPECT_EQ(found.path_id, 4u);
  EXPECT_FALSE(table.Find(501, &found));
}

TEST(GraphNodeTableTest, NodesCreatedWithNoRangeOpenAreNotKept) {
  GraphNodeTable table;
  table.NodeCreated(7, RangeContext{});
  RangeContext found;
  EXPECT_FALSE(table.Find(7, &found));
  EXPECT_EQ(table.size(), 0u);
}

TEST(GraphNodeTableTest, StopsGrowingAtItsLimit) {
  GraphNodeTable table(2);
  table.NodeCreated(1, RangeContext{1, 1});
  table.NodeCreated(2, RangeContext{2, 2});
  table.NodeCreated(3, RangeContext{3, 3});
  table.NodeCreated(1, RangeContext{9, 9});  // an existing node may still be updated
  RangeContext found;
  EXPECT_FALSE(table.Find(3, &found));
  ASSERT_TRUE(table.Find(1, &found));
  EXPECT_EQ(found.path_id, 9u);
  EXPECT_EQ(table.not_kept(), 1u);
}

}  // namespace
}  // namespace flopscope::injector::cupti
