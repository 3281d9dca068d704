#include "gapless/model/cluster.h"

#include <algorithm>
#include <atomic>
#include <string>

namespace gapless::model {
namespace {

Error fail(const std::string& msg) {
  return Error{msg};
}

int whole_gpus(const Allocation& a) {
  return static_cast<int>(
      std::count_if(a.gpus.begin(), a.gpus.end(), [](const GpuGrant& g) { return g.whole(); }));
}

// Applies one whole/shared/gpushare grant to `u`, or says why it does not fit.
Status apply_gpu_grant(const Gpu& gpu, GpuUsage& u, const GpuGrant& g) {
  const std::string where = "GPU " + std::to_string(gpu.index);
  if (gpu.mig.enabled) return fail(where + " is in MIG mode");
  if (g.whole()) {
    if (!u.idle()) return fail(where + " is not free");
    u.whole = true;
    return Status::Ok();
  }
  if (u.whole) return fail(where + " is held whole");
  if (g.memory_mib < 0 || g.compute_milli < 0 || g.gpushare_units < 0) {
    return fail(where + ": negative share");
  }
  if (g.gpushare_units > 0) {
    if (u.gpushare_used + g.gpushare_units > gpu.gpushare_capacity) {
      return fail(where + " lacks gpushare memory");
    }
    u.gpushare_used += g.gpushare_units;
  }
  if (g.memory_mib > 0 || g.compute_milli > 0) {
    if (u.memory_used_mib + g.memory_mib > gpu.memory_mib) return fail(where + " lacks vRAM");
    if (u.compute_used_milli + g.compute_milli > kFullComputeMilli) {
      return fail(where + " lacks compute");
    }
    u.memory_used_mib += g.memory_mib;
    u.compute_used_milli += g.compute_milli;
    ++u.shared_pods;
  }
  return Status::Ok();
}

Status apply_mig_grant(const Gpu& gpu, GpuUsage& u, const MigGrant& m) {
  const std::string where = "GPU " + std::to_string(gpu.index);
  if (!gpu.mig.enabled) return fail(where + " is not in MIG mode");
  if (u.whole || u.shared_pods > 0 || u.gpushare_used > 0) return fail(where + " is in use");
  const MigProfile* p = find_mig_profile(gpu.mig_family, m.profile);
  if (p == nullptr) return fail(where + " has no MIG profile " + m.profile);
  if (std::find(p->starts.begin(), p->starts.end(), m.start) == p->starts.end()) {
    return fail(where + ": " + m.profile + " cannot start at slice " + std::to_string(m.start));
  }
  const std::uint8_t mask = mig_slice_mask(m.start, p->memory_slices);
  if (!gpu.mig.reconfigurable()) {
    // Static layout: the instance must exist and be free.
    const auto& inst = gpu.mig.instances;
    std::size_t i = 0;
    while (i < inst.size() && !(inst[i].profile == m.profile && inst[i].start == m.start)) ++i;
    if (i == inst.size()) return fail(where + " has no " + m.profile + " instance at that start");
    if (u.mig_instance_used.size() != inst.size()) u.mig_instance_used.resize(inst.size(), false);
    if (u.mig_instance_used[i]) return fail(where + ": that MIG instance is taken");
    u.mig_instance_used[i] = true;
  } else {
    if ((u.mig_slices_used & mask) != 0) return fail(where + ": MIG slices overlap");
    if (u.mig_compute_used + p->compute_slices > kMigComputeSlices) {
      return fail(where + ": no MIG compute slices left");
    }
    if (p->media_extensions && u.mig_media_used > 0) return fail(where + ": +me instance taken");
  }
  u.mig_slices_used |= mask;
  u.mig_compute_used += p->compute_slices;
  if (p->media_extensions) ++u.mig_media_used;
  return Status::Ok();
}

}  // namespace

// All-or-nothing: grants are applied to a copy of the touched usage, written back only when
// every one of them fits.
Status apply_allocation(Node& node, const Allocation& a, bool check_host) {
  std::vector<GpuUsage> usage;
  usage.reserve(node.gpus.size());
  for (const Gpu& g : node.gpus) usage.push_back(g.used);
  std::map<std::string, MigPool> pool = node.mig_pool;
  if (check_host && node.host.cpu_milli > 0 &&
      node.host_used.cpu_milli + a.host.cpu_milli > node.host.cpu_milli) {
    return fail("node " + node.name + " lacks the CPU");
  }
  if (check_host && node.host.memory_mib > 0 &&
      node.host_used.memory_mib + a.host.memory_mib > node.host.memory_mib) {
    return fail("node " + node.name + " lacks the memory");
  }

  for (const GpuGrant& g : a.gpus) {
    if (g.index < 0 || g.index >= static_cast<int>(node.gpus.size())) {
      return fail("GPU " + std::to_string(g.index) + " does not exist on node " + node.name);
    }
    const Gpu& gpu = node.gpus[g.index];
    if (!g.uuid.empty() && !gpu.uuid.empty() && g.uuid != gpu.uuid) {
      return fail("GPU " + std::to_string(g.index) + " has UUID " + gpu.uuid + ", not " + g.uuid);
    }
    if (Status s = apply_gpu_grant(gpu, usage[g.index], g); !s) return s;
  }
  for (const MigGrant& m : a.mig) {
    if (m.gpu == -1) {
      auto it = pool.find(m.profile);
      if (it == pool.end() || it->second.used >= it->second.total) {
        return fail("no free " + m.profile + " MIG instance on node " + node.name);
      }
      ++it->second.used;
      continue;
    }
    if (m.gpu < 0 || m.gpu >= static_cast<int>(node.gpus.size())) {
      return fail("GPU " + std::to_string(m.gpu) + " does not exist on node " + node.name);
    }
    if (Status s = apply_mig_grant(node.gpus[m.gpu], usage[m.gpu], m); !s) return s;
  }
  for (std::size_t i = 0; i < usage.size(); ++i) node.gpus[i].used = std::move(usage[i]);
  node.mig_pool = std::move(pool);
  node.host_used.cpu_milli += a.host.cpu_milli;
  node.host_used.memory_mib += a.host.memory_mib;
  if (const int k = whole_gpus(a); k > 0) ++node.whole_pods[k];
  return Status::Ok();
}

// REQUIRES: `a` was applied to `node` by apply_allocation.
void unapply_allocation(Node& node, const Allocation& a) {
  node.host_used.cpu_milli -= a.host.cpu_milli;
  node.host_used.memory_mib -= a.host.memory_mib;
  if (const int k = whole_gpus(a); k > 0 && --node.whole_pods[k] <= 0) node.whole_pods.erase(k);
  for (const GpuGrant& g : a.gpus) {
    GpuUsage& u = node.gpus[g.index].used;
    if (g.whole()) {
      u.whole = false;
      continue;
    }
    u.gpushare_used -= g.gpushare_units;
    if (g.memory_mib > 0 || g.compute_milli > 0) {
      u.memory_used_mib -= g.memory_mib;
      u.compute_used_milli -= g.compute_milli;
      --u.shared_pods;
    }
  }
  for (const MigGrant& m : a.mig) {
    if (m.gpu == -1) {
      --node.mig_pool[m.profile].used;
      continue;
    }
    Gpu& gpu = node.gpus[m.gpu];
    const MigProfile* p = find_mig_profile(gpu.mig_family, m.profile);
    GpuUsage& u = gpu.used;
    u.mig_slices_used &= static_cast<std::uint8_t>(~mig_slice_mask(m.start, p->memory_slices));
    u.mig_compute_used -= p->compute_slices;
    if (p->media_extensions) --u.mig_media_used;
    const auto& inst = gpu.mig.instances;
    for (std::size_t i = 0; i < inst.size(); ++i) {
      if (inst[i].profile == m.profile && inst[i].start == m.start) u.mig_instance_used[i] = false;
    }
  }
}

void Cluster::upsert_node(Node node) {
  for (Gpu& g : node.gpus) {
    g.used = GpuUsage{};
    g.used.mig_instance_used.assign(g.mig.instances.size(), false);
  }
  for (auto& [profile, pool] : node.mig_pool) pool.used = 0;
  node.host_used = HostResources{};
  node.whole_pods.clear();
  if (auto old = nodes_.find(node.name); old != nodes_.end() && node.fence_reason.empty()) {
    node.fence_reason = old->second.fence_reason;
  }
  // Re-apply what pods already hold, in UID order so the outcome does not depend on hashing.
  std::vector<const Allocation*> held;
  if (auto pods = pods_by_node_.find(node.name); pods != pods_by_node_.end()) {
    for (const std::string& uid : pods->second) held.push_back(&allocations_.at(uid));
  }
  for (const Allocation* a : held) {
    stranded_.erase(a->pod_uid);
    if (Status s = apply_allocation(node, *a, check_host_); !s) {
      stranded_.insert(a->pod_uid);
      node.fence_reason = "the node's new inventory no longer holds the GPUs of pod " + a->pod_ns +
                          "/" + a->pod_name + " (" + s.error() + ")";
    }
  }
  if (auto old = nodes_.find(node.name); old != nodes_.end()) {
    node.slot = old->second.slot;
  } else if (!free_slots_.empty()) {
    node.slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    node.slot = static_cast<std::uint32_t>(slot_count_++);
  }
  touch(node);
  const std::string name = node.name;
  auto [it, added] = nodes_.insert_or_assign(name, std::move(node));
  if (added) by_name_.insert(&it->second);
}

Cluster::Cluster(const Cluster& other)
    : nodes_(other.nodes_),
      allocations_(other.allocations_),
      pods_by_node_(other.pods_by_node_),
      stranded_(other.stranded_),
      free_slots_(other.free_slots_),
      slot_count_(other.slot_count_),
      check_host_(other.check_host_),
      touched_(other.touched_),
      removed_(other.removed_),
      allocations_changed_(other.allocations_changed_) {
  reindex();
}

Cluster& Cluster::operator=(const Cluster& other) {
  if (this != &other) *this = Cluster(other);
  return *this;
}

void Cluster::reindex() {
  by_name_.clear();
  for (const auto& [name, n] : nodes_) by_name_.insert(&n);
}

void Cluster::touch(Node& node) {
  // Process-wide, so two clusters (or a node removed and added again) never share a generation.
  static std::atomic<std::uint64_t> clock{0};
  node.generation = ++clock;
  touched_.insert(node.name);
}

Cluster::Changes Cluster::take_changes() {
  Changes out;
  out.touched.assign(touched_.begin(), touched_.end());
  out.removed = std::move(removed_);
  out.allocations.assign(allocations_changed_.begin(), allocations_changed_.end());
  allocations_changed_.clear();
  touched_.clear();
  removed_.clear();
  return out;
}

bool Cluster::remove_node(const std::string& name) {
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return false;
  free_slots_.push_back(it->second.slot);
  removed_.push_back(&it->second);
  touched_.erase(name);
  by_name_.erase(name);
  nodes_.erase(it);
  if (auto pods = pods_by_node_.find(name); pods != pods_by_node_.end()) {
    for (const std::string& uid : pods->second) {
      stranded_.erase(uid);
      allocations_.erase(uid);
      allocations_changed_.insert(uid);
    }
    pods_by_node_.erase(pods);
  }
  return true;
}

const Node* Cluster::find_node(const std::string& name) const {
  return by_name_.find(name);
}

std::vector<const Node*> Cluster::nodes() const {
  std::vector<const Node*> out;
  out.reserve(nodes_.size());
  for (const auto& [name, n] : nodes_) out.push_back(&n);
  std::sort(out.begin(), out.end(), [](const Node* a, const Node* b) { return a->name < b->name; });
  return out;
}

Status Cluster::apply(const Allocation& a, bool allow_fenced) {
  if (a.pod_uid.empty()) return fail("allocation has no pod UID");
  if (allocations_.count(a.pod_uid) != 0) {
    return fail("pod " + a.pod_ns + "/" + a.pod_name + " already holds an allocation");
  }
  auto it = nodes_.find(a.node);
  if (it == nodes_.end()) return fail("node " + a.node + " is not in the model");
  if (it->second.fenced() && !allow_fenced) {
    return fail("node " + a.node + " is fenced: " + it->second.fence_reason);
  }
  if (Status s = apply_allocation(it->second, a, check_host_); !s) return s;
  touch(it->second);
  allocations_.emplace(a.pod_uid, a);
  pods_by_node_[a.node].insert(a.pod_uid);
  allocations_changed_.insert(a.pod_uid);
  return Status::Ok();
}

Status Cluster::commit(const Allocation& a) {
  return apply(a, false);
}
Status Cluster::restore(const Allocation& a) {
  return apply(a, true);
}

bool Cluster::release(const std::string& pod_uid) {
  auto it = allocations_.find(pod_uid);
  if (it == allocations_.end()) return false;
  auto n = nodes_.find(it->second.node);
  if (n != nodes_.end()) {
    if (stranded_.erase(pod_uid) == 0) unapply_allocation(n->second, it->second);
    touch(n->second);
  }
  if (auto pods = pods_by_node_.find(it->second.node); pods != pods_by_node_.end()) {
    pods->second.erase(pod_uid);
    if (pods->second.empty()) pods_by_node_.erase(pods);
  }
  allocations_changed_.insert(pod_uid);
  allocations_.erase(it);
  return true;
}

const Allocation* Cluster::allocation(const std::string& pod_uid) const {
  auto it = allocations_.find(pod_uid);
  return it == allocations_.end() ? nullptr : &it->second;
}

std::vector<const Allocation*> Cluster::allocations() const {
  std::vector<const Allocation*> out;
  out.reserve(allocations_.size());
  for (const auto& [uid, a] : allocations_) out.push_back(&a);
  std::sort(out.begin(), out.end(),
            [](const Allocation* x, const Allocation* y) { return x->pod_uid < y->pod_uid; });
  return out;
}

void Cluster::fence(const std::string& node, const std::string& reason) {
  if (auto it = nodes_.find(node); it != nodes_.end()) {
    it->second.fence_reason = reason;
    touch(it->second);
  }
}

}  // namespace gapless::model
