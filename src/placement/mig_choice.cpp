#include "mig_choice.h"

#include "gapless/model/cluster.h"
#include "gapless/placement/choice.h"
#include "gapless/placement/demand.h"

namespace gapless::placement {
namespace {

using model::MigGrant;

// Sum, over every non-media profile of the family and every start still usable on a GPU with
// this occupancy, of the profile's width: large profiles that remain placeable count most.
int freedom(model::MigFamily family, std::uint8_t used_mask, int compute_used) {
  int f = 0;
  for (const model::MigProfile& p : model::mig_profiles(family)) {
    if (p.media_extensions || compute_used + p.compute_slices > model::kMigComputeSlices) continue;
    for (int s : p.starts) {
      if ((used_mask & model::mig_slice_mask(s, p.memory_slices)) == 0) f += p.memory_slices;
    }
  }
  return f;
}

bool gpu_takes_mig(const model::Gpu& g, const model::GpuRequest& req) {
  const model::GpuUsage& u = g.used;
  return can_serve(g, req) && !u.whole && u.shared_pods == 0 && u.gpushare_used == 0;
}

struct Candidate {
  MigGrant grant;
  double value = -1;
  double gpu_score = 0;
};

// The single best next instance on `node` as it stands.
std::optional<Candidate> best_instance(const model::Node& node, const model::GpuRequest& req,
                                       const Profile& profile) {
  std::optional<Candidate> best;
  auto offer = [&](MigGrant g, double value, double gpu_score) {
    if (!best || value > best->value + 1e-12) best = Candidate{std::move(g), value, gpu_score};
  };
  for (const model::Gpu& g : node.gpus) {
    if (!gpu_takes_mig(g, req)) continue;
    const model::MigProfile* p = model::find_mig_profile(g.mig_family, req.mig_profile);
    const double gs = gpu_level_score(profile, node, g, req);
    if (!g.mig.reconfigurable()) {
      for (std::size_t i = 0; i < g.mig.instances.size(); ++i) {
        const auto& inst = g.mig.instances[i];
        const bool used = i < g.used.mig_instance_used.size() && g.used.mig_instance_used[i];
        if (inst.profile == req.mig_profile && !used) {
          offer({g.index, inst.profile, inst.start}, 2.0 + gs, gs);
        }
      }
      continue;
    }
    if (g.used.mig_compute_used + p->compute_slices > model::kMigComputeSlices) continue;
    if (p->media_extensions && g.used.mig_media_used > 0) continue;
    const double best_freedom = freedom(g.mig_family, 0, 0);
    for (int s : p->starts) {
      const std::uint8_t mask = model::mig_slice_mask(s, p->memory_slices);
      if ((g.used.mig_slices_used & mask) != 0) continue;
      const int f = freedom(g.mig_family, g.used.mig_slices_used | mask,
                            g.used.mig_compute_used + p->compute_slices);
      offer({g.index, std::string(p->name), s}, gs + 0.5 * f / best_freedom, gs);
    }
  }
  if (!best) {
    auto it = node.mig_pool.find(req.mig_profile);
    if (it != node.mig_pool.end() && it->second.used < it->second.total) {
      offer({-1, req.mig_profile, -1}, 0.0, 0.0);
    }
  }
  return best;
}

}  // namespace

std::optional<MigPick> choose_mig(const model::Node& node, const model::GpuRequest& req,
                                  const Profile& profile) {
  if (req.mig_count <= 0) return std::nullopt;
  MigPick pick;
  if (req.mig_count == 1) {
    auto c = best_instance(node, req, profile);
    if (!c) return std::nullopt;
    pick.grants.push_back(c->grant);
    pick.gpu_score = c->gpu_score;
    return pick;
  }
  // Several instances: place them one by one on a scratch copy so each sees the previous ones.
  model::Node scratch = node;
  double sum = 0;
  for (int i = 0; i < req.mig_count; ++i) {
    auto c = best_instance(scratch, req, profile);
    if (!c) return std::nullopt;
    model::Allocation one;
    one.mig.push_back(c->grant);
    if (!model::apply_allocation(scratch, one)) return std::nullopt;
    pick.grants.push_back(c->grant);
    sum += c->gpu_score;
  }
  pick.gpu_score = sum / req.mig_count;
  return pick;
}

int mig_capacity_when_empty(const model::Node& node, const model::GpuRequest& req) {
  int n = 0;
  for (const model::Gpu& g : node.gpus) {
    if (!can_serve(g, req)) continue;
    if (!g.mig.reconfigurable()) {
      for (const auto& inst : g.mig.instances) n += inst.profile == req.mig_profile ? 1 : 0;
      continue;
    }
    const model::MigProfile* p = model::find_mig_profile(g.mig_family, req.mig_profile);
    if (p->media_extensions) {
      n += 1;
      continue;
    }
    // Non-overlapping placements at allowed starts, bounded by the 7 compute slices.
    std::uint8_t mask = 0;
    int count = 0, compute = 0;
    for (int s : p->starts) {
      const std::uint8_t m = model::mig_slice_mask(s, p->memory_slices);
      if ((mask & m) == 0 && compute + p->compute_slices <= model::kMigComputeSlices) {
        mask |= m;
        compute += p->compute_slices;
        ++count;
      }
    }
    n += count;
  }
  if (auto it = node.mig_pool.find(req.mig_profile); it != node.mig_pool.end()) {
    n += it->second.total;
  }
  return n;
}

}  // namespace gapless::placement
