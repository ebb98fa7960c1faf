#include "injector/cupti/graph_node_table.h"

namespace flopscope::injector::cupti {

void GraphNodeTable::NodeCreated(uint64_t node_id, RangeContext context) {
  if (context.path_id == 0) return;
  MutexLock lock(&mutex_);
  if (nodes_.size() >= max_nodes_ && !nodes_.contains(node_id)) {
    ++not_kept_;
    return;
  }
  nodes_[node_id] = context;
}

void GraphNodeTable::NodeCloned(uint64_t node_id, uint64_t original_node_id) {
  MutexLock lock(&mutex_);
  auto original = nodes_.find(original_node_id);
  if (original == nodes_.end()) return;
  if (nodes_.size() >= max_nodes_ && !nodes_.contains(node_id)) {
    ++not_kept_;
    return;
  }
  const RangeContext context = original->second;  // copied: the insert may rehash
  nodes_[node_id] = context;
}

bool GraphNodeTable::Find(uint64_t node_id, RangeContext* context) const {
  MutexLock lock(&mutex_);
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return false;
  *context = it->second;
  return true;
}

size_t GraphNodeTable::size() const {
  MutexLock lock(&mutex_);
  return nodes_.size();
}

uint64_t GraphNodeTable::not_kept() const {
  MutexLock lock(&mutex_);
  return not_kept_;
}

}  // namespace flopscope::injector::cupti
