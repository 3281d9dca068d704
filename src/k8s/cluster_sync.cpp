// Node and Pod events -> the cluster model (docs/extender-protocol.md §4.4, "Rebuilding the
// in-memory model after a restart"). Allocation records are the truth; a record that cannot be
// applied fences its node instead of freeing anything.
#include "gapless/k8s/cluster_sync.h"

#include <algorithm>
#include <charconv>
#include <string_view>
#include <utility>

#include "gapless/k8s/allocation_record.h"
#include "gapless/k8s/json_fields.h"
#include "gapless/k8s/node_inventory.h"
#include "gapless/k8s/pod_request.h"

namespace gapless::k8s {

using nlohmann::json;

struct ClusterSync::Outbox {
  struct Bad {
    std::string pod, node, why;
  };
  std::vector<Bad> bad;
  std::vector<std::string> logs;
  struct Lifted {
    std::string node, why;
  };
  std::vector<Lifted> lifted;
  std::vector<Bad> dropped;  // reservations that lost to a record
};

namespace {

// Every fence a bad record sets starts so; a fence for another reason (an inventory change that
// stranded allocations) is never lifted here.
constexpr std::string_view kRecordFence = "allocation record of pod ";

std::string pod_key(const std::string& ns, const std::string& name) {
  return ns + "/" + name;
}

std::string node_name(const json& node) {
  const json* meta = field(node, "metadata");
  return meta != nullptr ? string_field(*meta, "name") : std::string();
}

// The same GPUs, shares and MIG slices (host resources are the pod's, whoever counted them).
bool same_grants(const model::Allocation& a, const model::Allocation& b) {
  return a.node == b.node && a.gpus == b.gpus && a.mig == b.mig;
}

// Whether the pod's PodScheduled condition says kube-scheduler found no node for it; *since
// gets the condition's lastTransitionTime. Only the reason Unschedulable counts: SchedulerError
// (a bind that failed) means some node passed.
bool unschedulable_condition(const json& status, std::string* since) {
  const json* conditions = field(status, "conditions");
  if (conditions == nullptr || !conditions->is_array()) return false;
  for (const json& c : *conditions) {
    if (!c.is_object() || string_field(c, "type") != "PodScheduled") continue;
    if (string_field(c, "status") != "False" || string_field(c, "reason") != "Unschedulable") {
      return false;
    }
    *since = string_field(c, "lastTransitionTime");
    return true;
  }
  return false;
}

}  // namespace

ClusterSync::ClusterSync(ClusterSyncHooks hooks, std::string scheduler_name)
    : hooks_(std::move(hooks)), scheduler_name_(std::move(scheduler_name)) {}

InformerHandlers ClusterSync::node_handlers() {
  InformerHandlers h;
  h.on_list = [this](const std::vector<json>& items) { replace_nodes(items); };
  h.on_event = [this](const std::string& type, const json& obj) { apply_node(type, obj); };
  h.on_error = [this](const std::string& m) { emit(Outbox{{}, {"nodes informer: " + m}, {}, {}}); };
  return h;
}

InformerHandlers ClusterSync::pod_handlers() {
  InformerHandlers h;
  h.on_list = [this](const std::vector<json>& items) { replace_pods(items); };
  h.on_event = [this](const std::string& type, const json& obj) { apply_pod(type, obj); };
  h.on_error = [this](const std::string& m) { emit(Outbox{{}, {"pods informer: " + m}, {}, {}}); };
  return h;
}

void ClusterSync::emit(const Outbox& out) const {
  if (hooks_.log) {
    for (const std::string& line : out.logs) hooks_.log(line);
  }
  if (hooks_.on_bad_record) {
    for (const Outbox::Bad& b : out.bad) hooks_.on_bad_record(b.pod, b.node, b.why);
  }
  if (hooks_.on_fence_lifted) {
    for (const Outbox::Lifted& l : out.lifted) hooks_.on_fence_lifted(l.node, l.why);
  }
  if (hooks_.on_reservation_dropped) {
    for (const Outbox::Bad& d : out.dropped) hooks_.on_reservation_dropped(d.pod, d.node, d.why);
  }
}

// ---- Nodes ------------------------------------------------------------------------------------

void ClusterSync::upsert(model::Cluster& c, const std::string& name, Result<model::Node> node,
                         Outbox& out) {
  const model::Node* old = c.find_node(name);
  if (!node.ok()) {
    out.logs.push_back(node.error() + (old != nullptr ? "; keeping the node's previous inventory"
                                                      : "; node left out until it is fixed"));
    return;
  }
  const bool was_fenced = old != nullptr && old->fenced();
  c.upsert_node(std::move(*node));
  if (const model::Node* now = c.find_node(name); !was_fenced && now->fenced()) {
    out.logs.push_back("node " + name + " fenced: " + now->fence_reason);
  }
}

void ClusterSync::retry_parked(model::Cluster& c, Outbox& out) {
  if (parked_.empty()) return;
  auto waiting = std::move(parked_);
  parked_.clear();
  for (const auto& [uid, pod] : waiting) account(c, pod, out);
}

void ClusterSync::apply_node(const std::string& type, const json& node) {
  const std::string name = node_name(node);
  Outbox out;
  if (name.empty()) {
    emit(Outbox{{}, {"ignoring a Node without metadata.name"}, {}, {}});
    return;
  }
  {
    std::lock_guard lock(mu_);
    if (type == "DELETED") {
      hooks_.mutate([&](model::Cluster& c) {
        const std::size_t before = c.allocation_count();
        if (c.remove_node(name) && c.allocation_count() != before) {
          out.logs.push_back("node " + name + " deleted with " +
                             std::to_string(before - c.allocation_count()) + " allocation(s)");
        }
      });
    } else {
      Result<model::Node> parsed = node_from_json(node);
      hooks_.mutate([&](model::Cluster& c) {
        upsert(c, name, std::move(parsed), out);
        retry_parked(c, out);
      });
    }
  }
  emit(out);
}

void ClusterSync::replace_nodes(const std::vector<json>& nodes) {
  std::vector<std::pair<std::string, Result<model::Node>>> parsed;
  std::unordered_set<std::string> listed;
  parsed.reserve(nodes.size());
  Outbox out;
  WaitNews news;
  for (const json& obj : nodes) {
    std::string name = node_name(obj);
    if (name.empty()) {
      out.logs.push_back("ignoring a Node without metadata.name");
      continue;
    }
    listed.insert(name);
    parsed.emplace_back(std::move(name), node_from_json(obj));
  }
  std::lock_guard order(report_mu_);  // waits reported in the order they are decided
  {
    std::lock_guard lock(mu_);
    hooks_.mutate([&](model::Cluster& c) {
      for (auto& [name, node] : parsed) upsert(c, name, std::move(node), out);
      std::vector<std::string> gone;
      for (const model::Node* n : c.nodes()) {
        if (listed.count(n->name) == 0) gone.push_back(n->name);
      }
      for (const std::string& name : gone) {
        c.remove_node(name);
        out.logs.push_back("node " + name + " is gone (deleted while not watching)");
      }
      retry_parked(c, out);
    });
    rereport_waits(news);
  }
  nodes_synced_ = true;
  emit(out);
  report(news);
}

// ---- Pods -------------------------------------------------------------------------------------

ClusterSync::PodFacts ClusterSync::pod_facts(const json& pod) {
  PodFacts p;
  const json* meta = field(pod, "metadata");
  if (meta != nullptr) {
    p.uid = string_field(*meta, "uid");
    p.ns = string_field(*meta, "namespace");
    p.name = string_field(*meta, "name");
    const std::string rv = string_field(*meta, "resourceVersion");
    (void)std::from_chars(rv.data(), rv.data() + rv.size(), p.version);
  }
  if (p.ns.empty()) p.ns = "default";
  if (const json* spec = field(pod, "spec")) {
    p.node = string_field(*spec, "nodeName");
    p.scheduler = string_field(*spec, "schedulerName");
  }
  if (const json* status = field(pod, "status")) {
    const std::string phase = string_field(*status, "phase");
    p.finished = phase == "Succeeded" || phase == "Failed";
    p.unschedulable = unschedulable_condition(*status, &p.unschedulable_since);
  }
  // A pod with metadata.deletionTimestamp still runs (and holds its GPUs) until DELETED.
  if (const json* record = field(field(meta, "annotations"), kAllocationAnnotation)) {
    p.has_record = true;
    p.record_is_string = record->is_string();
    p.record = p.record_is_string ? record->get<std::string>() : json_text(*record);
  }
  if (const json* mark = field(field(meta, "annotations"), "gapless.io/share-overuse");
      mark != nullptr && mark->is_string()) {
    p.share_overuse = mark->get<std::string>();
  }
  if (!p.finished) {
    Result<ParsedPod> parsed = parse_pod(pod);
    p.parsed = parsed.ok();
    p.asks_gpus = !parsed.ok() || parsed->request.kind != model::RequestKind::kNone;
    if (parsed.ok()) p.pod = std::move(*parsed);
  }
  return p;
}

void ClusterSync::forget(model::Cluster& c, const std::string& uid, Outbox& out,
                         std::uint64_t version) {
  parked_.erase(uid);
  confirmed_.erase(uid);
  if (version > 0 && departed_.insert_or_assign(uid, version).second) {
    departed_order_.push_back(uid);
    if (departed_order_.size() > kMaxDeparted) {
      departed_.erase(departed_order_.front());
      departed_order_.pop_front();
    }
  }
  clear_rejection(c, uid, "the pod finished or was deleted", out);
  unrecorded_.erase(uid);
}

void ClusterSync::clear_rejection(model::Cluster& c, const std::string& uid, const std::string& why,
                                  Outbox& out) {
  auto it = rejected_.find(uid);
  if (it == rejected_.end()) return;
  const std::string node = it->second.node;
  rejected_.erase(it);
  for (const auto& [other, r] : rejected_) {
    if (r.node == node) return;  // another bad record still fences it
  }
  const model::Node* n = c.find_node(node);
  if (n == nullptr || n->fence_reason.rfind(kRecordFence, 0) != 0) return;
  c.fence(node, "");
  ++fences_lifted_;
  const std::string text = "the record that fenced it is gone: " + why;
  out.lifted.push_back({node, text});
  out.logs.push_back("node " + node + " unfenced: " + text);
}

void ClusterSync::reject(model::Cluster& c, const PodFacts& p, const std::string& why,
                         Outbox& out) {
  const std::string who = pod_key(p.ns, p.name);
  c.fence(p.node, std::string(kRecordFence) + who + " unusable: " + why);
  rejected_[p.uid] = {p.record, p.node};
  ++bad_records_;
  out.bad.push_back({who, p.node, why});
  out.logs.push_back("pod " + who + ": " + why + "; node " + p.node + " fenced");
}

void ClusterSync::account(model::Cluster& c, const PodFacts& p, Outbox& out) {
  if (p.finished) {
    c.release(p.uid);
    forget(c, p.uid, out, p.version);
    return;
  }
  // Pending: nothing durable yet. A bind may be in flight, holding what the extender committed.
  if (p.node.empty()) return;
  const std::string who = pod_key(p.ns, p.name);
  if (!p.has_record) {
    if (p.asks_gpus && unrecorded_.insert(p.uid).second) {
      out.logs.push_back("pod " + who + " on node " + p.node + " has no " +
                         std::string(kAllocationAnnotation) +
                         " record (not bound by Gapless); its GPUs are not counted");
    }
    account_host_only(c, p);
    return;
  }
  if (c.find_node(p.node) == nullptr) {
    parked_[p.uid] = p;  // the node informer has not delivered its node yet
    return;
  }
  parked_.erase(p.uid);
  if (auto it = rejected_.find(p.uid); it != rejected_.end() && it->second.record == p.record) {
    return;
  }
  if (!p.record_is_string) {
    return reject(c, p, std::string(kAllocationAnnotation) + ": must be a string", out);
  }
  Result<model::Allocation> a = decode_allocation_record(p.record, p.ns, p.name, p.uid);
  if (!a.ok()) return reject(c, p, a.error(), out);
  if (p.parsed) {
    a->host = p.pod.request.host;
    a->priority = p.pod.info.priority;
    a->movable = p.pod.info.movable;
    a->started_unix_s = p.pod.info.started_unix_s;
  }
  if (a->node != p.node) {
    return reject(c, p, "record names node " + a->node + ", pod runs on " + p.node, out);
  }
  if (const model::Allocation* held = c.allocation(p.uid)) {
    if (same_grants(*held, *a)) {  // committed at bind, or already restored
      confirm(p);
      // What the pod says beside its record may change (gapless.io/movable, the
      // deletionTimestamp of an eviction, status.startTime once it runs): consolidation must
      // see it.
      if (held->movable == a->movable && held->priority == a->priority &&
          held->started_unix_s == a->started_unix_s) {
        return;
      }
      c.release(p.uid);
      (void)c.restore(*a);  // the same grants it held a moment ago: cannot fail
      return;
    }
    // The model holds other GPUs for it (a bind by this replica that lost to another
    // replica's binding of the same pod): the binding wins.
    out.logs.push_back("pod " + who + " is bound to " + p.node + " with other GPUs than the " +
                       "model had on " + held->node + "; replacing its allocation");
    if (confirmed_.count(p.uid) == 0) {
      ++reservations_dropped_;
      out.dropped.push_back({who, held->node, "the API server has another record for it"});
    }
    c.release(p.uid);
  }
  Status s = c.restore(*a);
  if (!s.ok()) s = yield_reservations(c, *a, out);
  if (!s.ok()) return reject(c, p, s.error(), out);
  confirm(p);
  clear_rejection(c, p.uid, "pod " + who + "'s record is usable now", out);
}

Status ClusterSync::yield_reservations(model::Cluster& c, const model::Allocation& a, Outbox& out) {
  std::vector<model::Allocation> local;  // pod-UID order: the loser is chosen deterministically
  for (const model::Allocation* held : c.allocations()) {
    if (held->node == a.node && confirmed_.count(held->pod_uid) == 0) local.push_back(*held);
  }
  for (const model::Allocation& l : local) c.release(l.pod_uid);
  Status s = c.restore(a);
  for (const model::Allocation& l : local) {
    // Always fits when the record did not go in: the model is as it was.
    if (c.restore(l).ok() || !s.ok()) continue;
    ++reservations_dropped_;
    const std::string who = pod_key(l.pod_ns, l.pod_name);
    const std::string why = "pod " + pod_key(a.pod_ns, a.pod_name) +
                            " is bound to the same GPUs (its record on the API server wins)";
    out.dropped.push_back({who, l.node, why});
    out.logs.push_back("reservation of pod " + who + " on node " + l.node + " dropped: " + why);
  }
  return s;
}

// Any pod bound to a node holds that node's CPU and memory, whoever bound it: counted (never
// refused) so that scores see what GPU pods will find next to the GPUs.
void ClusterSync::account_host_only(model::Cluster& c, const PodFacts& p) {
  if (!p.parsed || p.pod.request.host == model::HostResources{}) return;
  if (c.allocation(p.uid) != nullptr || c.find_node(p.node) == nullptr) return;
  model::Allocation a;
  a.pod_uid = p.uid;
  a.pod_ns = p.ns;
  a.pod_name = p.name;
  a.node = p.node;
  a.host = p.pod.request.host;
  a.priority = p.pod.info.priority;
  a.movable = p.pod.info.movable;
  a.started_unix_s = p.pod.info.started_unix_s;
  (void)c.restore(a);  // cannot fail: node and UID checked, host never refused
  confirm(p);
}

void ClusterSync::learn(const PodFacts& p) const {
  if (hooks_.share_overuse) hooks_.share_overuse(p.uid, p.finished ? "" : p.share_overuse);
  if (p.finished) {
    if (hooks_.forget) hooks_.forget(p.uid);
  } else if (p.parsed && hooks_.observe) {
    model::PodInfo info = p.pod.info;
    info.uid = p.uid;
    hooks_.observe(info, p.pod.request);
  }
}

void ClusterSync::apply_pod(const std::string& type, const json& pod) {
  PodFacts p = pod_facts(pod);
  if (p.uid.empty()) {
    emit(Outbox{{}, {"ignoring pod " + pod_key(p.ns, p.name) + " without metadata.uid"}, {}, {}});
    return;
  }
  if (type == "DELETED") p.finished = true;
  Outbox out;
  WaitNews news;
  std::lock_guard order(report_mu_);  // waits reported in the order they are decided
  {
    std::lock_guard lock(mu_);
    hooks_.mutate([&](model::Cluster& c) { account(c, p, out); });
    track_wait(p, news);
  }
  learn(p);
  emit(out);
  report(news);
}

void ClusterSync::replace_pods(const std::vector<json>& pods) {
  std::vector<PodFacts> facts;
  facts.reserve(pods.size());
  std::unordered_set<std::string> running;  // listed and not finished
  Outbox out;
  WaitNews news;
  for (const json& pod : pods) {
    PodFacts p = pod_facts(pod);
    if (p.uid.empty()) {
      out.logs.push_back("ignoring pod " + pod_key(p.ns, p.name) + " without metadata.uid");
      continue;
    }
    if (!p.finished) running.insert(p.uid);
    facts.push_back(std::move(p));
  }
  std::lock_guard order(report_mu_);  // waits reported in the order they are decided
  {
    std::lock_guard lock(mu_);
    hooks_.mutate([&](model::Cluster& c) {
      for (const PodFacts& p : facts) account(c, p, out);
      // Deleted while we were not watching: free what they held, and nothing else.
      std::vector<std::string> vanished;
      for (const model::Allocation* a : c.allocations()) {
        if (running.count(a->pod_uid) == 0) vanished.push_back(a->pod_uid);
      }
      for (const std::string& uid : vanished) {
        c.release(uid);
        confirmed_.erase(uid);
      }
      if (!vanished.empty()) {
        out.logs.push_back("released the allocations of " + std::to_string(vanished.size()) +
                           " pod(s) that are gone");
      }
      std::vector<std::string> gone_bad;
      for (const auto& [uid, r] : rejected_) {
        if (running.count(uid) == 0) gone_bad.push_back(uid);
      }
      for (const std::string& uid : gone_bad) {
        clear_rejection(c, uid, "the pod is gone (relist)", out);
      }
    });
    std::erase_if(parked_, [&](const auto& kv) { return running.count(kv.first) == 0; });
    std::erase_if(unrecorded_, [&](const std::string& uid) { return running.count(uid) == 0; });
    relist_waits(facts, running, news);
  }
  for (const PodFacts& p : facts) learn(p);
  pods_synced_ = true;
  emit(out);
  report(news);
}

// ---- Waiting pods -----------------------------------------------------------------------------

bool ClusterSync::waits(const PodFacts& p) const {
  return p.unschedulable && !p.finished && p.node.empty() && p.parsed &&
         p.pod.request.kind != model::RequestKind::kNone && p.scheduler == scheduler_name_;
}

void ClusterSync::track_wait(const PodFacts& p, WaitNews& news) {
  if (!hooks_.unschedulable) return;
  if (waits(p)) {
    Waiter w{p.pod, p.unschedulable_since};
    w.pod.info.uid = p.uid;
    waiting_[p.uid] = w;
    news.waiting.push_back(std::move(w));
  } else if (waiting_.erase(p.uid) > 0) {
    news.ended.push_back(p.uid);
  }
}

namespace {

// The scheduler's table is oldest first: the longest waiting first (a condition without a time
// last), whatever order the pods were listed in.
template <class Waiter>
void longest_waiting_first(std::vector<Waiter>& waiting) {
  std::stable_sort(waiting.begin(), waiting.end(), [](const Waiter& a, const Waiter& b) {
    return !a.since.empty() && (b.since.empty() || a.since < b.since);
  });
}

}  // namespace

void ClusterSync::relist_waits(const std::vector<PodFacts>& facts,
                               const std::unordered_set<std::string>& running, WaitNews& news) {
  for (const PodFacts& p : facts) track_wait(p, news);
  // Deleted while we were not watching.
  std::erase_if(waiting_, [&](const auto& kv) {
    if (running.count(kv.first) != 0) return false;
    news.ended.push_back(kv.first);
    return true;
  });
  longest_waiting_first(news.waiting);
}

void ClusterSync::rereport_waits(WaitNews& news) const {
  for (const auto& [uid, w] : waiting_) news.waiting.push_back(w);
  // Ties (pods without a time) in UID order, not the hash table's.
  std::sort(news.waiting.begin(), news.waiting.end(),
            [](const Waiter& a, const Waiter& b) { return a.pod.info.uid < b.pod.info.uid; });
  longest_waiting_first(news.waiting);
}

void ClusterSync::report(const WaitNews& news) const {
  if (hooks_.stop_waiting) {
    for (const std::string& uid : news.ended) hooks_.stop_waiting(uid);
  }
  for (const Waiter& w : news.waiting) hooks_.unschedulable(w.pod);
}

std::size_t ClusterSync::unschedulable() const {
  std::lock_guard lock(mu_);
  return waiting_.size();
}

std::optional<std::uint64_t> ClusterSync::departed_at(const std::string& uid) const {
  std::lock_guard lock(mu_);
  auto it = departed_.find(uid);
  if (it == departed_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::uint64_t> ClusterSync::confirmed_at(const std::string& uid) const {
  std::lock_guard lock(mu_);
  auto it = confirmed_.find(uid);
  if (it == confirmed_.end() || it->second == 0) return std::nullopt;
  return it->second;
}

}  // namespace gapless::k8s
