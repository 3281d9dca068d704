#include "gapless/placement/verdict_cache.h"

#include <functional>

namespace gapless::placement {

namespace {

struct Slot {
  std::uint64_t generation = 0;  // 0: empty (Cluster's generations start at 1)
  double value = 0;
};

std::size_t hash_request(const model::GpuRequest& r, const Profile* profile) {
  const std::size_t h = std::hash<const void*>{}(profile);
  return h ^ (model::GpuRequestHash{}(r) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
}

}  // namespace

struct VerdictCache::Table {
  model::GpuRequest req;
  const Profile* profile = nullptr;
  std::size_t hash = 0;
  std::mutex mu;
  std::vector<Slot> slots;  // by Node::slot
};

bool scores_are_cacheable(const Profile& profile) {
  const ScoreContext& ctx = profile.context;
  if ((ctx.workload != nullptr || ctx.fragments != nullptr) && !ctx.cache_owner_tracks_mix) {
    return false;
  }
  for (const auto* level : {&profile.node, &profile.gpu}) {
    for (const WeightedStrategy& ws : *level) {
      if (ws.strategy->uses_draw()) return false;
    }
  }
  return true;
}

VerdictCache::VerdictCache(std::size_t max_shapes) : max_shapes_(max_shapes < 1 ? 1 : max_shapes) {}

void VerdictCache::clear() {
  std::lock_guard lock(mu_);
  tables_.clear();
}

void VerdictCache::clear_scores() {
  std::lock_guard lock(mu_);
  tables_.remove_if([](const std::shared_ptr<Table>& t) { return t->profile != nullptr; });
}

VerdictCache::Lease VerdictCache::lease(const model::GpuRequest& req, const Profile* profile,
                                        std::size_t slots) {
  const std::size_t h = hash_request(req, profile);
  std::shared_ptr<Table> table;
  {
    std::lock_guard lock(mu_);
    for (auto it = tables_.begin(); it != tables_.end(); ++it) {
      const Table& t = **it;
      if (t.hash == h && t.profile == profile && t.req == req) {
        tables_.splice(tables_.begin(), tables_, it);  // most recently used first
        table = tables_.front();
        break;
      }
    }
    if (!table) {
      table = std::make_shared<Table>();
      table->req = req;
      table->profile = profile;
      table->hash = h;
      tables_.push_front(table);
      if (tables_.size() > max_shapes_) tables_.pop_back();
    }
  }
  Lease lease(std::move(table), this);
  if (lease.bypassed()) {
    bypasses_.fetch_add(1, std::memory_order_relaxed);
  } else if (lease.table_->slots.size() < slots) {
    lease.table_->slots.resize(slots);
  }
  return lease;
}

// try_to_lock: a call never waits for another one's whole loop (issue 38: a /filter naming 1.2M
// unknown nodes held the table for seconds, and every filter of the same shape waited).
VerdictCache::Lease::Lease(std::shared_ptr<Table> table, VerdictCache* owner)
    : table_(std::move(table)), lock_(table_->mu, std::try_to_lock), owner_(owner) {}

VerdictCache::Lease::~Lease() {
  if (!table_) return;  // moved from
  owner_->hits_.fetch_add(hits_, std::memory_order_relaxed);
  owner_->misses_.fetch_add(misses_, std::memory_order_relaxed);
}

bool VerdictCache::Lease::get(const model::Node& node, double* value) {
  if (bypassed()) {
    ++misses_;
    return false;
  }
  const auto& slots = table_->slots;
  if (node.slot < slots.size() && slots[node.slot].generation == node.generation) {
    *value = slots[node.slot].value;
    ++hits_;
    return true;
  }
  ++misses_;
  return false;
}

void VerdictCache::Lease::put(const model::Node& node, double value) {
  if (bypassed()) return;
  auto& slots = table_->slots;
  if (node.slot >= slots.size()) slots.resize(node.slot + 1);
  slots[node.slot] = Slot{node.generation, value};
}

}  // namespace gapless::placement
