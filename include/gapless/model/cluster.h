// The cluster model: nodes and the allocations of the pods on them.
//
// Thread-safety: none. The server guards one Cluster with a reader/writer lock; the bench owns
// its own. Every mutation either applies completely or leaves the model unchanged.
#pragma once

#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "gapless/model/allocation.h"
#include "gapless/model/name_index.h"
#include "gapless/model/node.h"
#include "gapless/model/result.h"

namespace gapless::model {

class Cluster {
 public:
  Cluster() = default;
  // Copies re-index their own nodes; moves keep the nodes where they are.
  Cluster(const Cluster& other);
  Cluster& operator=(const Cluster& other);
  Cluster(Cluster&&) = default;
  Cluster& operator=(Cluster&&) = default;

  // Adds or replaces a node's inventory. Allocations already on the node are re-applied to the
  // new inventory; one that no longer fits (its GPU vanished, say) fences the node instead of
  // being dropped, so no GPU is ever silently freed.
  void upsert_node(Node node);
  // Removes the node and every allocation on it. Returns false if it was unknown.
  bool remove_node(const std::string& name);

  const Node* find_node(const std::string& name) const;
  // Nodes in name order (deterministic iteration for /debug/state and benches).
  std::vector<const Node*> nodes() const;
  std::size_t node_count() const { return nodes_.size(); }
  // One more than the largest Node::slot in use: the size a per-slot table needs.
  std::size_t slot_count() const { return slot_count_; }

  // Checks that `a` fits the node's free capacity right now and applies it.
  // Fails (model unchanged) if the pod already holds an allocation, the node is unknown or fenced,
  // or any GPU, share or MIG slice in it is not free.
  Status commit(const Allocation& a);
  // Applies `a` even on a fenced node (restart recovery: the record is the truth). Still refuses
  // anything that would over-commit.
  Status restore(const Allocation& a);
  // Frees the pod's allocation. Returns false if the pod held none.
  bool release(const std::string& pod_uid);

  const Allocation* allocation(const std::string& pod_uid) const;
  // Allocations in pod-UID order.
  std::vector<const Allocation*> allocations() const;
  std::size_t allocation_count() const { return allocations_.size(); }

  void fence(const std::string& node, const std::string& reason);

  // Whether commit/restore refuse an allocation whose CPU or memory exceeds what the node has
  // left (default true). The extender counts host resources only to score; kube-scheduler's
  // NodeResourcesFit decides whether they fit, and its view, not ours, is authoritative.
  void set_check_host(bool check) { check_host_ = check; }

  // What changed since the last call: the names of nodes added or changed (new generation), each
  // once, and the addresses nodes removed since had (keys for caches keyed by node address; never
  // dereferenced), and the pods whose allocation was committed, restored or released (by
  // release or with its node), each once. For drivers that keep per-node or per-pod state
  // current (placement::Scheduler).
  struct Changes {
    std::vector<std::string> touched;
    std::vector<const Node*> removed;
    std::vector<std::string> allocations;
  };
  Changes take_changes();

 private:
  Status apply(const Allocation& a, bool allow_fenced);
  // Marks a node as changed (new Node::generation) and notes it for take_changes().
  void touch(Node& node);

  // Rebuilds by_name_ from nodes_ (after a copy).
  void reindex();

  // The nodes, at stable addresses; find_node looks them up in by_name_ (filter looks up every
  // candidate name of every pod).
  std::unordered_map<std::string, Node> nodes_;
  NameIndex by_name_;
  std::unordered_map<std::string, Allocation> allocations_;
  // Pod UIDs per node, sorted: upsert_node re-applies a node's pods without scanning every
  // allocation (a rebuild from N nodes and P pods stays O(N + P), not O(N x P)).
  std::unordered_map<std::string, std::set<std::string>> pods_by_node_;
  // Allocations kept (their GPUs are not freed) but not applied to usage, because the node's
  // inventory changed under them; their node is fenced.
  std::set<std::string> stranded_;
  // Slots of removed nodes, handed out again before new ones.
  std::vector<std::uint32_t> free_slots_;
  std::size_t slot_count_ = 0;
  bool check_host_ = true;
  std::set<std::string> touched_;
  std::vector<const Node*> removed_;
  std::set<std::string> allocations_changed_;
};

// Applies `grant`s of `a` to the node's usage counters, or explains why they do not fit.
// Exposed for placement's "what if" checks; Cluster::commit is the normal entry point.
// `check_host` false: CPU and memory are counted but never refused (see Cluster::set_check_host).
Status apply_allocation(Node& node, const Allocation& a, bool check_host = true);
void unapply_allocation(Node& node, const Allocation& a);

}  // namespace gapless::model
