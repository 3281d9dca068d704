// Node name -> node, for Cluster::find_node: the stages' hottest lookup (kube-scheduler sends
// every candidate node's name with every call, thousands of them). An open-addressing table of
// (hash, node) pairs: a lookup reads one slot of a dense array and then the node itself, which
// the caller reads next anyway, where a std::unordered_map<std::string, Node> walks a bucket
// chain to a large element and compares there (45 % of a 5,000-node filter's time, measured).
//
// Holds addresses only: the owner keeps the nodes at stable addresses and tells the index
// about every node it adds or removes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "gapless/model/node.h"

namespace gapless::model {

class NameIndex {
 public:
  // Adds a node not in the index yet (by its name).
  void insert(const Node* node);
  // Removes the node of that name if present.
  void erase(std::string_view name);
  void clear();
  const Node* find(std::string_view name) const;

 private:
  struct Slot {
    std::uint64_t hash = 0;
    const Node* node = nullptr;  // null: empty
  };
  static std::uint64_t hash_of(std::string_view name);
  void place(Slot s);  // REQUIRES: a free slot exists
  void grow();

  std::vector<Slot> slots_;  // size 0 or a power of two, at most half full
  std::size_t size_ = 0;
};

}  // namespace gapless::model
