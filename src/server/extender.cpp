#include "gapless/server/extender.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <unordered_set>
#include <utility>

#include "args_reader.h"
#include "explain_json.h"
#include "gapless/door/worker_pool.h"
#include "gapless/k8s/allocation_record.h"
#include "gapless/k8s/pod_request.h"
#include "gapless/placement/engine.h"
#include "gapless/server/log.h"
#include "pairing_nodes.h"
#include "wire.h"

namespace gapless::server {

using nlohmann::json;

namespace {

// Times a verb and records its outcome on destruction.
class VerbTimer {
 public:
  VerbTimer(Metrics& m, std::string verb)
      : m_(m), verb_(std::move(verb)), start_(std::chrono::steady_clock::now()) {}
  ~VerbTimer() {
    const std::chrono::duration<double> d = std::chrono::steady_clock::now() - start_;
    m_.observe_request(verb_, ok_, d.count());
  }
  void fail() { ok_ = false; }

 private:
  Metrics& m_;
  std::string verb_;
  std::chrono::steady_clock::time_point start_;
  bool ok_ = true;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// `work()`, its time recorded as bind phase `phase` (gapless_bind_phase_seconds).
template <class Work>
auto timed_phase(Metrics& m, const char* phase, Work&& work) {
  const auto start = std::chrono::steady_clock::now();
  auto result = work();
  m.observe_bind_phase(phase, seconds_since(start));
  return result;
}

std::string filter_error(const std::string& message) {
  return wire::dump(json{{"Nodes", nullptr},
                         {"NodeNames", nullptr},
                         {"FailedNodes", nullptr},
                         {"FailedAndUnresolvableNodes", nullptr},
                         {"Error", message}});
}

std::string error_only(const std::string& message) {
  return wire::dump(json{{"Error", message}});
}

// Why an answer was refused before it was built (--max-answer-bytes).
std::string answer_too_large(std::size_t at_least, std::size_t limit) {
  return "answer of at least " + std::to_string(at_least) + " bytes would exceed the limit of " +
         std::to_string(limit) + " bytes (--max-answer-bytes); ask about fewer nodes";
}

// What filter and prioritize both read: the pod and the candidate nodes.
struct ExtenderArgs {
  k8s::ParsedPod pod;
  std::vector<std::string> nodes;
  bool full_mode = false;
  // Full mode: the JSON of the Node item nodes[i] (filter answers with the passing ones).
  std::function<std::string(std::size_t)> item_json;
};

// Bodies through simdjson (wire::read_extender_args) when it takes them; the Pod's text then
// goes through the usual parser, so a pod is checked the same way on both paths.
std::optional<Result<ExtenderArgs>> read_args(std::string_view body, std::size_t readable) {
  auto read = wire::read_extender_args(body, readable);
  if (!read) return std::nullopt;
  auto pod = wire::parse_object(read->pod);
  if (!pod) return Result<ExtenderArgs>(Error{pod.error()});
  auto parsed = k8s::parse_pod(*pod);
  if (!parsed) return Result<ExtenderArgs>(Error{parsed.error()});
  return Result<ExtenderArgs>(ExtenderArgs{std::move(*parsed), std::move(read->names),
                                           read->full_mode, std::move(read->item_json)});
}

// `readable`: bytes readable at body.data(), for the fast reader (0: only the body).
Result<ExtenderArgs> parse_args(std::string_view body, std::size_t readable = 0) {
  if (auto read = read_args(body, readable)) return std::move(*read);
  auto args = wire::parse_extender_args(body);
  if (!args) return Error{args.error()};
  const json* pod = wire::field(args->object, "Pod");
  if (pod == nullptr) return Error{"request has no Pod"};
  auto parsed = k8s::parse_pod(*pod);
  if (!parsed) return Error{parsed.error()};
  bool full = false;
  auto names = wire::node_names(*args, &full);
  if (!names) return Error{names.error()};
  ExtenderArgs out{std::move(*parsed), std::move(*names), full, {}};
  json* nodes = full ? wire::field(args->object, "Nodes") : nullptr;
  if (json* items = nodes != nullptr ? wire::field(*nodes, "items") : nullptr) {
    // Moved, not copied: the items are most of a full-node body.
    auto held = std::make_shared<json>(std::move(*items));
    out.item_json = [held](std::size_t i) { return wire::dump(held->at(i)); };
  }
  return out;
}

// The best raw score minus the runner-up's, when at least two nodes fit.
void observe_margin(Metrics& m, const std::vector<double>& raw) {
  double best = -1, second = -1;
  for (double r : raw) {
    if (r > best) {
      second = best;
      best = r;
    } else if (r > second) {
      second = r;
    }
  }
  if (second >= 0) m.observe_score_margin(best - second);
}

std::string pod_key(const model::PodInfo& p) {
  return p.ns + "/" + p.name;
}

// The waiting pods' clock (placement::Scheduler::wait): seconds, steady.
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

Extender::Extender(model::Cluster cluster, placement::Policy policy, Binder& binder,
                   Metrics& metrics)
    : scheduler_(std::move(cluster), std::move(policy), placement::SchedulerOptions{false}),
      binder_(binder),
      metrics_(metrics) {}

Extender::~Extender() {
  // The gate first: a bind it releases now still finds the bind threads. Then the threads: binds
  // waiting for one are answered by their guards, running ones finish while the model, the
  // binder and the gate (their close) still stand.
  stop_binds();
}

void Extender::set_policy(placement::Policy policy) {
  scheduler_.set_policy(std::move(policy));
}

std::string Extender::policy_source() const {
  return scheduler_.policy()->policy.source;
}

void Extender::set_readiness(std::function<bool()> ready) {
  const std::lock_guard lock(ready_mutex_);
  ready_ = std::move(ready);
}

bool Extender::ready() const {
  std::function<bool()> ready;
  {
    const std::lock_guard lock(ready_mutex_);
    ready = ready_;
  }
  return !ready || ready();
}

void Extender::mutate(const std::function<void(model::Cluster&)>& f) {
  scheduler_.mutate(f);
}

k8s::ClusterSyncHooks Extender::sync_hooks() {
  k8s::ClusterSyncHooks h;
  h.mutate = [this](const std::function<void(model::Cluster&)>& f) { scheduler_.mutate(f); };
  h.observe = [this](const model::PodInfo& pod, const model::GpuRequest& req) {
    scheduler_.observe(pod, req);
    metrics_.note_mix_version(scheduler_.mix_version());
  };
  h.forget = [this](const std::string& uid) { scheduler_.forget(uid); };
  h.unschedulable = [this](const k8s::ParsedPod& pod) { note_unschedulable(pod); };
  h.stop_waiting = [this](const std::string& uid) { scheduler_.stop_waiting(uid); };
  h.share_overuse = [this](const std::string& uid, const std::string& mark) {
    overuse_.note(uid, mark);
  };
  h.on_reservation_dropped = [this](const std::string&, const std::string&, const std::string&) {
    metrics_.count_reservation_dropped();
  };
  return h;
}

std::string Extender::filter(std::string_view body) {
  return filter_body(body, 0);
}

std::string Extender::filter(const std::string& body, std::size_t answer_limit) {
  return filter_body(body, body.capacity(), answer_limit);
}

std::string Extender::filter_body(std::string_view body, std::size_t readable,
                                  std::size_t answer_limit) {
  VerbTimer timer(metrics_, "filter");
  if (!ready()) {
    timer.fail();
    return filter_error(kNotReady);
  }
  auto args = parse_args(body, readable);
  if (!args) {
    timer.fail();
    return filter_error(args.error());
  }
  // Resolve the profile now so a pod naming a missing one fails here, visibly, not at bind.
  std::string policy_error;
  const auto loaded = scheduler_.policy();
  const placement::Profile* profile =
      placement::Scheduler::select_profile(*loaded, args->pod.info, &policy_error);
  if (profile == nullptr) {
    timer.fail();
    return filter_error(policy_error);
  }
  // Every pod that reaches us counts in the learned workload mix (once), CPU-only pods too:
  // they take the CPU that GPU pods need next to their GPUs.
  scheduler_.observe(args->pod.info, args->pod.request);
  metrics_.note_mix_version(scheduler_.mix_version());
  placement::FilterResult r =
      scheduler_.filter(*loaded, args->pod.info, args->pod.request, *profile, args->nodes);
  if (const std::size_t at_least = wire::filter_answer_bytes_at_least(r); at_least > answer_limit) {
    timer.fail();
    metrics_.count_overload("filter");
    return filter_error(answer_too_large(at_least, answer_limit));
  }
  note_waiting(args->pod, *profile, r);
  // Pods without GPUs too: with managedResources empty, kube-scheduler binds them through us.
  pending_.remember(args->pod);
  std::vector<std::size_t> per_reason(r.reasons.size());
  for (const auto& rejection : r.rejected) ++per_reason[rejection.reason];
  for (std::size_t i = 0; i < r.reasons.size(); ++i) {
    metrics_.count_rejection(std::string(r.reasons[i].label), static_cast<double>(per_reason[i]));
  }
  if (!args->full_mode) return wire::filter_names_answer(r);  // no DOM: issue 12
  return wire::filter_items_answer(r, args->nodes, args->item_json);
}

void Extender::note_waiting(const k8s::ParsedPod& pod, const placement::Profile& profile,
                            const placement::FilterResult& r) {
  const double now = now_seconds();
  // kube-scheduler requeues an unschedulable pod at least every 5 minutes
  // (podMaxInUnschedulablePodsDuration), so one not filtered for twice that has gone unseen.
  scheduler_.expire_waiting(now - kWaitingTtlSeconds);
  if (r.passed.empty()) scheduler_.wait(pod.info, pod.request, profile, now);
}

void Extender::note_unschedulable(const k8s::ParsedPod& pod) {
  // The profile as filter selects it (PreFilter); a pod naming a missing one is told so by
  // filter when it gets there, and waits for nothing until then.
  const auto loaded = scheduler_.policy();
  std::string error;
  const placement::Profile* profile =
      placement::Scheduler::select_profile(*loaded, pod.info, &error);
  if (profile == nullptr) return;
  scheduler_.wait(pod.info, pod.request, *profile, now_seconds(),
                  placement::Scheduler::WaitSource::kUnschedulable);
}

std::string Extender::prioritize(std::string_view body) {
  return prioritize_body(body, 0);
}

std::string Extender::prioritize(const std::string& body, std::size_t answer_limit) {
  return prioritize_body(body, body.capacity(), answer_limit);
}

std::string Extender::prioritize_body(std::string_view body, std::size_t readable,
                                      std::size_t answer_limit) {
  VerbTimer timer(metrics_, "prioritize");
  if (!ready()) {
    timer.fail();
    return error_only(kNotReady);
  }
  auto args = parse_args(body, readable);
  std::string policy_error;
  const placement::Profile* profile = nullptr;
  const auto loaded = scheduler_.policy();
  if (args) {
    profile = placement::Scheduler::select_profile(*loaded, args->pod.info, &policy_error);
  }
  if (!args || profile == nullptr) {
    // HostPriorityList has no Error field; kube-scheduler ignores a prioritize failure, and a
    // person calling us by hand still reads why.
    timer.fail();
    return error_only(args ? policy_error : args.error());
  }
  if (const std::size_t at_least = wire::host_priority_list_bytes_at_least(args->nodes);
      at_least > answer_limit) {
    timer.fail();
    metrics_.count_overload("prioritize");
    return error_only(answer_too_large(at_least, answer_limit));
  }
  scheduler_.observe(args->pod.info, args->pod.request);
  metrics_.note_mix_version(scheduler_.mix_version());
  const std::vector<double> raw =
      scheduler_.score(*loaded, args->pod.request, *profile, args->nodes);
  observe_margin(metrics_, raw);
  const std::vector<int> scores = placement::Scheduler::normalize(args->nodes, raw);
  pending_.remember(args->pod);
  return wire::host_priority_list(args->nodes, scores);  // no DOM: issue 12
}

std::string Extender::explain(std::string_view body) const {
  if (!ready()) return wire::dump(explanation_error(kNotReady));
  auto args = parse_args(body);
  if (!args) return wire::dump(explanation_error(args.error()));
  std::string policy_error;
  const auto loaded = scheduler_.policy();
  const placement::Profile* profile =
      placement::Scheduler::select_profile(*loaded, args->pod.info, &policy_error);
  if (profile == nullptr) return wire::dump(explanation_error(policy_error));
  // Read-only: no observe, no pending pod, no metrics; the model and the mix stay as they were.
  // Consolidation's plan is computed but never applied here (no clock: no GPU-time, and the
  // rate limits count only moves made).
  const placement::ConsolidationRules& rules = loaded->policy.consolidation;
  placement::ConsolidationSearch search;
  if (rules.enabled)
    search = scheduler_.consolidate(args->pod.info, args->pod.request, *profile, 0);
  return wire::dump(
      explanation_json(pod_key(args->pod.info), profile->name,
                       scheduler_.explain(args->pod.info, args->pod.request, *profile, args->nodes),
                       rules, &search));
}

Result<model::Allocation> Extender::reserve_claimed(const k8s::ParsedPod& pod,
                                                    const placement::Profile& profile,
                                                    const std::string& node, bool* conflict) {
  constexpr int kReplans = 2;
  std::vector<model::Allocation> beside;  // other replicas' claims that stood in the way
  for (int attempt = 0;; ++attempt) {
    auto placed = timed_phase(metrics_, "reserve", [&] {
      return scheduler_.reserve(pod.info, pod.request, profile, node, beside);
    });
    if (!placed && attempt > 0) {
      return Error{"nothing fits beside other replicas' claims: " + placed.error()};
    }
    if (!placed || claims_ == nullptr || pod.request.kind == model::RequestKind::kNone) {
      return placed;
    }
    std::vector<model::Allocation> others;
    Status claimed = timed_phase(metrics_, "claim", [&] {
      return claims_->claim(*placed, [&](const std::vector<model::Allocation>& o) {
        others = o;
        Status fits = fits_beside(*placed, o);
        *conflict = !fits.ok();
        return fits;
      });
    });
    if (claimed) return placed;
    scheduler_.unreserve(*placed);
    if (!*conflict || attempt == kReplans) return Error{claimed.error()};
    beside = std::move(others);
  }
}

Status Extender::fits_beside(const model::Allocation& ours,
                             const std::vector<model::Allocation>& others) const {
  Status out = Status::Ok();
  scheduler_.read([&](const model::Cluster& c) {
    const model::Allocation* held = c.allocation(ours.pod_uid);
    const model::Node* n = c.find_node(ours.node);
    if (held == nullptr || !(*held == ours) || n == nullptr) {
      out = Error{"its reservation was taken back meanwhile (a bound pod needed the GPUs)"};
      return;
    }
    model::Node node = *n;  // ours is counted in it; add what the model does not know yet
    for (const model::Allocation& o : others) {
      const model::Allocation* counted = c.allocation(o.pod_uid);
      if (counted != nullptr && counted->node == o.node && counted->gpus == o.gpus &&
          counted->mig == o.mig) {
        continue;  // the watch already delivered it
      }
      if (Status s = model::apply_allocation(node, o, /*check_host=*/false); !s.ok()) {
        out = Error{"pod " + o.pod_ns + "/" + o.pod_name + " holds part of what we chose (" +
                    s.error() + ")"};
        return;
      }
    }
  });
  return out;
}

void Extender::enable_pairing(PairingOptions options) {
  pairing_ = std::make_unique<PairingWaits>(options, metrics_.registry(),
                                            [](const std::string& m) { log_error(m); });
}

void Extender::stop_pairing() {
  if (pairing_) pairing_->shutdown();
}

std::string Extender::bind(std::string_view body) {
  std::promise<std::string> answer;
  auto later = answer.get_future();
  bind_async(std::string(body), [&answer](std::string a) { answer.set_value(std::move(a)); });
  return later.get();
}

void Extender::enable_bind_threads(std::size_t threads, std::size_t max_queue) {
  bind_threads_ = std::make_unique<door::WorkerPool>(std::max<std::size_t>(threads, 1), max_queue);
}

void Extender::stop_binds() {
  stop_pairing();
  if (bind_threads_) bind_threads_->stop();
}

namespace {

// A bind handed to the bind threads. Answers exactly once: with the bind's answer, or, when the
// job is dropped unrun (the threads stopped), with an Error kube-scheduler retries.
class QueuedBind {
 public:
  QueuedBind(std::string body, std::function<void(std::string)> done)
      : body_(std::move(body)), done_(std::move(done)) {}
  ~QueuedBind() {
    if (done_) done_(error_only("gapless is shutting down; kube-scheduler will retry the pod"));
  }
  QueuedBind(const QueuedBind&) = delete;
  QueuedBind& operator=(const QueuedBind&) = delete;
  const std::string& body() const { return body_; }
  void answer(std::string a) { std::exchange(done_, nullptr)(std::move(a)); }

 private:
  std::string body_;
  std::function<void(std::string)> done_;
};

}  // namespace

void Extender::run_bind(std::string body, std::function<void(std::string answer)> done) {
  if (!bind_threads_) return done(bind_now(body));
  auto queued = std::make_shared<QueuedBind>(std::move(body), std::move(done));
  std::function<void()> job = [this, queued, submitted = std::chrono::steady_clock::now()] {
    metrics_.observe_bind_phase("queue", seconds_since(submitted));
    queued->answer(bind_now(queued->body()));
  };
  if (bind_threads_->try_submit(job)) return;
  metrics_.count_bind("error");
  metrics_.observe_request("bind", false, 0);
  if (bind_threads_->stopped()) return;  // the guard answers: shutting down
  queued->answer(error_only("gapless has " + std::to_string(bind_threads_->max_queue()) +
                            " binds waiting for a bind thread (--bind-threads); kube-scheduler "
                            "will retry the pod"));
}

void Extender::bind_async(std::string body, std::function<void(std::string answer)> done) {
  // What the gate needs: the pod, its node and its classes (remembered at filter). Anything
  // missing: bind_now answers it as before (an Error, or a pod without device requests).
  std::optional<k8s::ParsedPod> pod;
  std::string node;
  if (pairing_ && ready()) {
    if (auto args = wire::parse_object(body)) {
      auto uid = wire::string_field(*args, "PodUID");
      auto target = wire::string_field(*args, "Node");
      if (uid && target) {
        pod = pending_.find(*uid);
        node = *target;
      }
    }
  }
  if (!pod || pod->device_classes.empty() || !runs_gapless_plugin(scheduler_, node)) {
    return run_bind(std::move(body), std::move(done));
  }
  const std::string uid = pod->info.uid;
  auto shared = std::make_shared<std::pair<std::string, std::function<void(std::string)>>>(
      std::move(body), std::move(done));
  pairing_->admit(
      node, uid, pod_key(pod->info), pod->device_classes,
      [this, shared, uid] {
        run_bind(std::move(shared->first), [this, shared, uid](std::string answer) {
          bool bound = false;
          scheduler_.read([&](const model::Cluster& c) { bound = c.allocation(uid) != nullptr; });
          // Not bound by this call (or an earlier one): the node will never see it from us.
          if (!bound) pairing_->close(uid, placement::CloseReason::kBindFailed);
          shared->second(std::move(answer));
        });
      },
      [this, shared](const std::string& why) {
        metrics_.count_bind("error");
        metrics_.observe_request("bind", false, 0);
        shared->second(error_only(why));
      });
}

std::string Extender::bind_now(std::string_view body) {
  VerbTimer timer(metrics_, "bind");
  auto fail = [&](const std::string& message) {
    timer.fail();
    metrics_.count_bind("error");
    return error_only(message);
  };
  if (!ready()) return fail(kNotReady);
  auto args = wire::parse_object(body);
  if (!args) return fail(args.error());
  auto name = wire::string_field(*args, "PodName");
  auto ns = wire::string_field(*args, "PodNamespace");
  auto uid = wire::string_field(*args, "PodUID");
  auto node = wire::string_field(*args, "Node");
  for (const auto* r : {&name, &ns, &uid, &node}) {
    if (!*r) return fail(r->error());
  }
  const std::string who = *ns + "/" + *name;

  // A pod that already holds an allocation: a retry after a reply was lost. Fine on the same
  // node for the same pod, never elsewhere, and never for another pod naming its UID.
  std::optional<model::Allocation> held;
  scheduler_.read([&](const model::Cluster& c) {
    if (const model::Allocation* a = c.allocation(*uid)) held = *a;
  });
  if (held) {
    if (held->pod_ns != *ns || held->pod_name != *name) {
      return fail("PodUID " + *uid + " belongs to " + held->pod_ns + "/" + held->pod_name +
                  ", not " + who);
    }
    if (held->node != *node) return fail("pod " + who + " is already bound to node " + held->node);
    metrics_.count_bind("idempotent");
    return error_only("");
  }
  auto pod = pending_.find(*uid);
  if (!pod) {
    return fail("pod " + who + " (uid " + *uid +
                ") was not seen by filter recently; kube-scheduler will retry it");
  }
  if (pod->info.name != *name || pod->info.ns != *ns) {
    return fail("PodUID " + *uid + " belongs to " + pod_key(pod->info) + ", not " + who);
  }
  // Whoever reaches the extender can send /filter: from here on the pod is the cluster's
  // (Kubernetes mode: the API server's, checked against the node; Binder::admit).
  auto admitted = timed_phase(metrics_, "admit", [&] {
    return binder_.admit(BindRequest{*ns, *name, *uid, *node, {}}, *pod);
  });
  if (!admitted) {
    timer.fail();
    metrics_.count_bind("refused");
    return error_only(admitted.error());
  }
  pod = std::move(*admitted);
  std::string policy_error;
  const auto loaded = scheduler_.policy();
  const placement::Profile* profile =
      placement::Scheduler::select_profile(*loaded, pod->info, &policy_error);
  if (profile == nullptr) return fail(policy_error);
  // A pod without GPUs (kube-scheduler sends every pod when managedResources is empty) binds
  // with no record; what it holds of the node's CPU and memory is counted for scoring.
  const bool holds_gpus = pod->request.kind != model::RequestKind::kNone;
  std::map<std::string, std::string> annotations;
  std::optional<model::Allocation> reserved;
  // Re-check against the model as it is now: binds run after later pods' filters. Another
  // replica may have chosen the same GPUs from its own model: claimed before the Binding.
  bool conflict = false;
  auto placed = reserve_claimed(*pod, *profile, *node, &conflict);
  if (placed) {
    reserved = std::move(*placed);
  } else if (holds_gpus) {
    timer.fail();
    metrics_.count_bind(conflict ? "conflict" : "error");
    return error_only("cannot bind " + who + " to " + *node + ": " + placed.error());
  }
  if (reserved && holds_gpus) {
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    scheduler_.read([&](const model::Cluster& c) {
      const model::Node* n = c.find_node(*node);  // with it, MIG entries name their GPU's UUID
      annotations[std::string(k8s::kAllocationAnnotation)] =
          k8s::encode_allocation_record(*reserved, n);
      if (n == nullptr) return;  // removed meanwhile: the binder's answer decides
      for (auto& [k, v] : k8s::gpushare_annotations(
               *reserved, *n, std::chrono::duration_cast<std::chrono::nanoseconds>(now).count())) {
        annotations[k] = v;
      }
    });
  }
  const bool claimed = claims_ != nullptr && reserved && holds_gpus;
  // The reservation holds the GPUs while the binder works, without blocking filters.
  Status s = timed_phase(metrics_, "binding", [&] {
    return binder_.bind(BindRequest{*ns, *name, *uid, *node, std::move(annotations)});
  });
  if (!s) {
    // Undo only our own reservation: while the binder worked, the informer may have replaced
    // it with what the API server says (the pod bound elsewhere, by a racing retry).
    if (reserved) scheduler_.unreserve(*reserved);
    if (claimed) claims_->release(*reserved);
    return fail("binding " + who + " to " + *node + ": " + s.error());
  }
  pending_.forget(*uid);
  metrics_.count_bind("success");
  return error_only("");
}

}  // namespace gapless::server
