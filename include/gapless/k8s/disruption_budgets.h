// PodDisruptionBudgets for preemption, resolved as kube-scheduler resolves them: a PDB informer
// (policy/v1 poddisruptionbudgets) gives each budget's selector, status.disruptionsAllowed and
// status.disruptedPods; the pod informer (ClusterSync's observe / forget hooks) gives pods'
// labels. resolve() turns them into plain model::DisruptionBudget (which pod UIDs each covers)
// for placement::Scheduler::select_victims, so the engine never reads a Kubernetes object.
//
// Matching follows kube-scheduler v1.26 (defaultpreemption filterPodsWithPDBViolation): same
// namespace; a nil or empty selector, or one that does not parse, matches no pod; pods listed in
// status.disruptedPods are left out (already counted).
//
// Thread-safe: informer threads and preempt calls may use it concurrently.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "gapless/k8s/informer.h"
#include "gapless/model/disruption_budget.h"
#include "gapless/model/labels.h"
#include "gapless/model/request.h"

namespace gapless::k8s {

// spec.selector of a PDB (metav1.LabelSelector JSON); nullopt when absent or invalid.
std::optional<model::LabelSelector> parse_label_selector(const nlohmann::json& selector);

class DisruptionBudgets {
 public:
  // Handlers for the PDB informer (/apis/policy/v1/poddisruptionbudgets).
  InformerHandlers handlers();
  // A pod seen (labels may have changed) or gone.
  void observe_pod(const model::PodInfo& pod);
  void forget_pod(const std::string& uid);
  // Every budget with the pods it covers now, by name.
  std::vector<model::DisruptionBudget> resolve() const;
  bool synced() const { return synced_.load(); }

  void apply(const std::string& type, const nlohmann::json& pdb);
  void replace(const std::vector<nlohmann::json>& pdbs);

 private:
  struct Budget {
    std::string ns, name;
    std::optional<model::LabelSelector> selector;  // nullopt: matches nothing
    std::int32_t allowed = 0;
    std::unordered_set<std::string> disrupted;  // pod names
  };
  struct Pod {
    std::string name;
    model::Labels labels;
  };
  static std::optional<Budget> parse(const nlohmann::json& pdb);

  mutable std::mutex mu_;
  std::unordered_map<std::string, Budget> budgets_;  // by "namespace/name"
  // Pods by namespace, then UID.
  std::unordered_map<std::string, std::unordered_map<std::string, Pod>> pods_;
  std::unordered_map<std::string, std::string> pod_ns_;  // UID -> namespace
  std::atomic<bool> synced_{false};
};

}  // namespace gapless::k8s
