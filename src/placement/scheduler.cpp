#include "gapless/placement/scheduler.h"

#include <unordered_set>
#include <utility>

namespace gapless::placement {

namespace {

// Every input node (each once) unresolvable for one PreFilter reason.
FilterResult refuse_all(const std::vector<std::string>& nodes, FilterResult::Reason why) {
  FilterResult r;
  r.reasons.push_back(std::move(why));
  std::unordered_set<std::string> seen;
  for (const std::string& n : nodes) {
    if (seen.insert(n).second) r.rejected.push_back({n, 0});
  }
  return r;
}

// Runs `score(profile, cache)`; for a strategy that draws (the random baseline, rare) with a
// copy of the profile carrying this pod's draw, and no cache: those scores are the pod's own.
template <typename Score>
std::vector<double> with_draw(const Profile& profile, std::uint64_t draw, VerdictCache* cache,
                              Score score) {
  if (!profile_draws(profile)) return score(profile, cache);
  Profile drawn = profile;
  drawn.context.draw = draw;
  return score(drawn, nullptr);
}

}  // namespace

Scheduler::Scheduler(model::Cluster cluster, Policy policy, SchedulerOptions options)
    : options_(options),
      cluster_(std::move(cluster)),
      stages_(make_stages(options.check_host, options.fixed_mix)),
      fragments_(stages_.mix->mix()) {
  cluster_.set_check_host(options_.check_host);
  cluster_.take_changes();
  fragments_.rebuild(cluster_.nodes());
  summary_.rebuild(cluster_.nodes(), fragments_);
  for (const auto& stage : stages_.ordered) stage->start(cluster_);
  policy_ = load(std::move(policy));
}

std::shared_ptr<const LoadedPolicy> Scheduler::load(Policy policy) const {
  auto loaded = std::make_shared<LoadedPolicy>(options_.cache_shapes);
  loaded->policy = std::move(policy);
  for (Profile& p : loaded->policy.profiles) {
    p.context.workload = &stages_.mix->mix();
    p.context.fragments = &fragments_;
    p.context.cache_owner_tracks_mix = true;
  }
  loaded->cache_mix_version = mix_version_.load();
  return loaded;
}

std::shared_ptr<const LoadedPolicy> Scheduler::policy() const {
  std::lock_guard lock(policy_mu_);
  return policy_;
}

void Scheduler::set_policy(Policy policy) {
  // Under the read lock: the new cache starts at the current mix version, and a mix change
  // (write lock) cannot slip in between.
  std::shared_lock model(mu_);
  auto loaded = load(std::move(policy));
  std::lock_guard lock(policy_mu_);
  policy_ = std::move(loaded);
}

StageCall Scheduler::call(const Policy& policy, const model::PodInfo& pod,
                          const model::GpuRequest& req) const {
  const ClusterSummary& total = summary_.total();
  // Every GPU, whatever its health: a percentage quota is of the cluster's size.
  const auto gpus = static_cast<std::int64_t>(total.gpus_healthy + total.gpus_unhealthy);
  return StageCall{cluster_, policy.quotas, gpus, pod, req, options_.check_host};
}

bool Scheduler::observe(const model::PodInfo& pod, const model::GpuRequest& req) {
  if (pod.uid.empty()) return false;
  {
    // Most calls are for a pod already counted (prioritize after filter, informer updates):
    // answer those under the read lock, so they never wait for or block the stages.
    std::shared_lock lock(mu_);
    if (stages_.mix->seen(pod.uid)) return false;
  }
  auto lock = lock_for_write();
  const LearnedMixStage::Observed seen = stages_.mix->observe(pod, req);
  if (seen == LearnedMixStage::Observed::kMixChanged) mix_changed();
  return seen != LearnedMixStage::Observed::kAlreadySeen;
}

void Scheduler::forget(const std::string& pod_uid) {
  auto lock = lock_for_write();
  for (const auto& stage : stages_.ordered) stage->pod_forgotten(cluster_, pod_uid);
}

VerdictCache* Scheduler::score_cache(const LoadedPolicy& loaded) const {
  const bool current = loaded.cache_mix_version.load() == mix_version_.load();
  return options_.use_cache && current ? &loaded.cache : nullptr;
}

std::unique_lock<std::shared_mutex> Scheduler::lock_for_write() const {
  writers_waiting_.fetch_add(1);
  std::unique_lock lock(mu_);
  writers_waiting_.fetch_sub(1);
  return lock;
}

void Scheduler::mix_changed() {
  fragments_.remix();  // follow_changes keeps it over exactly the model's nodes
  summary_.refresh_fragments(fragments_);
  scores_changed();
}

void Scheduler::scores_changed() {
  const std::uint64_t version = ++mix_version_;
  auto loaded = policy();
  loaded->cache.clear_scores();  // fit verdicts do not depend on the mix
  loaded->cache_mix_version = version;
}

FilterResult Scheduler::filter(const LoadedPolicy& loaded, const model::PodInfo& pod,
                               const model::GpuRequest& req,
                               const std::vector<std::string>& nodes) const {
  std::shared_lock lock(mu_);
  return filter_locked(loaded, pod, req, nodes, options_.use_cache ? &loaded.cache : nullptr);
}

FilterResult Scheduler::filter_locked(const LoadedPolicy& loaded, const model::PodInfo& pod,
                                      const model::GpuRequest& req,
                                      const std::vector<std::string>& nodes, VerdictCache* cache,
                                      std::vector<const model::Node*>* passed_nodes) const {
  const StageCall c = call(loaded.policy, pod, req);
  for (const auto& stage : stages_.ordered) {
    if (auto why = stage->pre_filter(c)) return refuse_all(nodes, std::move(*why));
  }
  std::vector<const model::Node*> resolved;
  FilterResult r = placement::filter(cluster_, req, nodes, cache, options_.check_host, &resolved);
  for (const auto& stage : stages_.ordered) stage->filter(c, &r, &resolved);
  if (passed_nodes != nullptr) *passed_nodes = std::move(resolved);
  return r;
}

FilterResult Scheduler::filter(const LoadedPolicy& loaded, const model::PodInfo& pod,
                               const model::GpuRequest& req, const Profile& profile,
                               const std::vector<std::string>& nodes, std::uint64_t draw) const {
  // One read lock for filter and the scores narrowing needs: the nodes that passed still fit
  // when scored, so scoring neither looks their names up again nor re-checks the fit.
  std::shared_lock lock(mu_);
  std::vector<const model::Node*> passed_nodes;
  FilterResult r = filter_locked(loaded, pod, req, nodes,
                                 options_.use_cache ? &loaded.cache : nullptr, &passed_nodes);
  for (const auto& stage : stages_.ordered) {
    if (!stage->narrows(profile, r.passed.size())) continue;
    const auto raw = score_locked(loaded, req, profile, passed_nodes, draw);
    stage->narrow(profile, &r, &passed_nodes, raw);
  }
  return r;
}

std::vector<double> Scheduler::score_locked(const LoadedPolicy& loaded,
                                            const model::GpuRequest& req, const Profile& profile,
                                            const std::vector<const model::Node*>& nodes,
                                            std::uint64_t draw) const {
  return with_draw(profile, draw, score_cache(loaded), [&](const Profile& p, VerdictCache* c) {
    return score_passed_nodes(nodes, req, p, cluster_.slot_count(), c);
  });
}

std::vector<double> Scheduler::score(const LoadedPolicy& loaded, const model::GpuRequest& req,
                                     const Profile& profile, const std::vector<std::string>& nodes,
                                     std::uint64_t draw) const {
  std::shared_lock lock(mu_);
  return score_named_locked(loaded, req, profile, nodes, draw);
}

std::vector<double> Scheduler::score(const LoadedPolicy& loaded, const model::PodInfo& pod,
                                     const model::GpuRequest& req, const Profile& profile,
                                     const std::vector<std::string>& nodes,
                                     std::uint64_t draw) const {
  std::shared_lock lock(mu_);  // one lock: the scores and what PostScore withholds, of one model
  std::vector<double> raw = score_named_locked(loaded, req, profile, nodes, draw);
  const StageCall c = call(loaded.policy, pod, req);
  for (const auto& stage : stages_.ordered) stage->post_score(c, nodes, &raw);
  return raw;
}

std::vector<double> Scheduler::score_named_locked(const LoadedPolicy& loaded,
                                                  const model::GpuRequest& req,
                                                  const Profile& profile,
                                                  const std::vector<std::string>& nodes,
                                                  std::uint64_t draw) const {
  return with_draw(profile, draw, score_cache(loaded), [&](const Profile& p, VerdictCache* c) {
    return score_nodes(cluster_, req, p, nodes, c, options_.check_host);
  });
}

std::vector<int> Scheduler::normalize(const std::vector<std::string>& nodes,
                                      const std::vector<double>& raw) {
  std::vector<std::uint64_t> rank;
  rank.reserve(nodes.size());
  for (const std::string& n : nodes) rank.push_back(tie_break_rank(n));
  return normalize_scores(raw, rank);
}

std::vector<std::optional<VictimChoice>> Scheduler::select_victims(
    const model::PodInfo& pod, const model::GpuRequest& req, const std::vector<VictimQuery>& nodes,
    const std::vector<DisruptionBudget>& budgets) const {
  model::GpuRequest fit = req;
  if (!options_.check_host) fit.host = {};
  const auto loaded = policy();
  std::shared_lock lock(mu_);
  const StageCall c = call(loaded->policy, pod, fit);
  std::vector<std::optional<VictimChoice>> out;
  for (const auto& stage : stages_.ordered) {
    if (stage->post_filter(c, nodes, budgets, &out)) return out;
  }
  return std::vector<std::optional<VictimChoice>>(nodes.size());  // no stage chooses victims
}

void Scheduler::mutate(const std::function<void(model::Cluster&)>& f) {
  auto lock = lock_for_write();
  f(cluster_);
  follow_changes();
}

void Scheduler::read(const std::function<void(const model::Cluster&)>& f) const {
  std::shared_lock lock(mu_);
  f(cluster_);
}

void Scheduler::follow_changes() {
  model::Cluster::Changes changes = cluster_.take_changes();
  const bool spare = fragments_.empty_hosts_to_spare();
  for (const model::Node* gone : changes.removed) {
    fragments_.erase(gone);
    summary_.erase(gone);
  }
  std::vector<const model::Node*> touched;
  for (const std::string& name : changes.touched) {
    const model::Node* n = cluster_.find_node(name);
    if (n == nullptr) continue;
    fragments_.refresh_node(*n);
    summary_.refresh_node(*n, fragments_);
    touched.push_back(n);
  }
  for (const auto& stage : stages_.ordered) stage->model_changed(cluster_, changes, touched);
  // The share rule reads it (gapless.cpp): its cached scores are stale once it turns.
  if (fragments_.empty_hosts_to_spare() != spare) scores_changed();
}

}  // namespace gapless::placement
