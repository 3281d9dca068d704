// Claim objects with resourceVersion preconditions (extender-protocol.md §4, "Optimistic
// concurrency"; docs/high-availability.md).
#include "gapless/k8s/node_claims.h"

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "gapless/k8s/allocation_record.h"
#include "gapless/k8s/json_fields.h"
#include "url.h"

namespace gapless::k8s {

using nlohmann::json;

namespace {

constexpr std::size_t kMaxObjectName = 253;  // a DNS subdomain
constexpr std::string_view kPrefix = "gapless-claims-";
constexpr std::string_view kSharedPrefix = "gapless-claimset-";  // never a node's object name

std::int64_t system_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool same_entry(const Claim& c, const std::string& uid, const std::string& holder) {
  return c.uid == uid && c.holder == holder;
}

// FNV-1a: unlike std::hash, the same in every build, so every replica puts a node's claims in
// the same object.
std::uint64_t stable_hash(std::string_view s) {
  std::uint64_t h = 14695981039346656037ULL;
  for (unsigned char ch : s) {
    h ^= ch;
    h *= 1099511628211ULL;
  }
  return h;
}

std::optional<std::uint64_t> parse_version(std::string_view text) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return v;
}

}  // namespace

std::string encode_claims(const std::vector<Claim>& claims) {
  json out = json::array();
  for (const Claim& c : claims) {
    out.push_back({{"uid", c.uid},
                   {"ns", c.ns},
                   {"name", c.name},
                   {"holder", c.holder},
                   {"record", c.record},
                   {"at", c.at_ms}});
  }
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<std::vector<Claim>> decode_claims(std::string_view text) {
  if (!json_depth_ok(text)) return Error{"claims: nested too deeply"};
  const json in = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!in.is_array()) return Error{"claims: not a JSON array"};
  std::vector<Claim> out;
  for (const json& e : in) {
    if (!e.is_object()) return Error{"claims: an entry is not an object"};
    Claim c;
    for (auto [key, dst] : {std::pair{"uid", &c.uid},
                            {"ns", &c.ns},
                            {"name", &c.name},
                            {"holder", &c.holder},
                            {"record", &c.record}}) {
      const json* v = field(e, key);
      if (v == nullptr || !v->is_string() || (v->get<std::string>().empty() && *key != 'r')) {
        return Error{std::string("claims: an entry lacks \"") + key + "\""};
      }
      *dst = v->get<std::string>();
    }
    const json* at = field(e, "at");
    const auto ms = at != nullptr ? as_int64(*at) : std::nullopt;
    if (!ms) return Error{"claims: an entry lacks \"at\""};
    c.at_ms = *ms;
    out.push_back(std::move(c));
  }
  return out;
}

std::string claims_object_name(const std::string& node, std::size_t objects) {
  if (objects > 0) return std::string(kSharedPrefix) + std::to_string(stable_hash(node) % objects);
  std::string name = std::string(kPrefix) + node;
  if (name.size() <= kMaxObjectName) return name;
  const std::string hash = std::to_string(std::hash<std::string>{}(node));
  return name.substr(0, kMaxObjectName - hash.size() - 1) + "-" + hash;
}

// ---- KubeNodeClaims ----------------------------------------------------------------------------

KubeNodeClaims::KubeNodeClaims(ApiTransport& api, ClaimOptions options)
    : api_(api), options_(std::move(options)) {}

std::size_t KubeNodeClaims::max_claims() const {
  if (options_.max_claims > 0) return options_.max_claims;
  return options_.objects == 0 ? 256 : 2048;
}

std::int64_t KubeNodeClaims::now() const {
  return options_.now_ms ? options_.now_ms() : system_ms();
}

Result<KubeNodeClaims::Object> KubeNodeClaims::read(const std::string& name) {
  Object obj;
  obj.name = name;
  const std::string what = "reading claims object " + options_.ns + "/" + name + ": ";
  Result<ApiResponse> r = api_.call("GET", "/api/v1/namespaces/" + url_encode(options_.ns) +
                                               "/configmaps/" + url_encode(obj.name));
  if (!r.ok()) return Error{what + r.error()};
  if (r->status == 404) return obj;
  if (!r->ok()) return Error{what + api_error(*r)};
  const json cm = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  const json* meta = field(cm, "metadata");
  if (meta == nullptr) return Error{"claims object " + obj.name + " has no metadata"};
  obj.exists = true;
  obj.resource_version = string_field(*meta, "resourceVersion");
  // Unreadable claims cannot be honoured: fail closed (no bind on its nodes) rather than ignore
  // them, until an operator deletes the object.
  const auto unreadable = [&](const std::string& why) {
    return Error{"claims object " + options_.ns + "/" + obj.name + " is unreadable (" + why +
                 "); delete it to unblock binds on its nodes"};
  };
  if (const json* settled = field(field(cm, "data"), kSettledKey)) {
    auto v = settled->is_string() ? parse_version(settled->get<std::string>()) : std::nullopt;
    if (!v) return unreadable(std::string(kSettledKey) + " is not a resourceVersion");
    obj.settled_through = *v;
  }
  const json* text = field(field(cm, "data"), kClaimsKey);
  if (text == nullptr) return obj;  // created empty by hand: no claims
  auto claims = text->is_string() ? decode_claims(text->get<std::string>())
                                  : Result<std::vector<Claim>>(Error{"claims: not a string"});
  if (!claims.ok()) return unreadable(claims.error());
  obj.claims = std::move(*claims);
  return obj;
}

Result<KubeNodeClaims::Object> KubeNodeClaims::remembered_or_read(const std::string& name) {
  {
    std::lock_guard lock(remembered_mu_);
    if (auto it = remembered_.find(name); it != remembered_.end()) return it->second;
  }
  return read(name);
}

void KubeNodeClaims::remember(const std::string& name, std::optional<Object> obj) {
  std::lock_guard lock(remembered_mu_);
  if (!obj) {
    remembered_.erase(name);
    return;
  }
  if (remembered_.size() >= kMaxRemembered && remembered_.count(name) == 0) remembered_.clear();
  remembered_[name] = std::move(*obj);
}

Status KubeNodeClaims::caught_up(std::uint64_t rv) const {
  if (rv == 0) return Status::Ok();
  if (!settlement_.seen_through) {
    return Error{"claims settled through resourceVersion " + std::to_string(rv) +
                 " cannot be judged without a pod informer"};
  }
  // The informer normally trails the API server by milliseconds; poll rather than couple the
  // informer to the claims.
  const auto end = std::chrono::steady_clock::now() + options_.informer_wait;
  std::uint64_t seen = settlement_.seen_through();
  while (seen < rv) {
    if (std::chrono::steady_clock::now() >= end) {
      return Error{"the pod informer is behind the claims (at resourceVersion " +
                   std::to_string(seen) + ", claims settled through " + std::to_string(rv) + ")"};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    seen = settlement_.seen_through();
  }
  return Status::Ok();
}

std::uint64_t KubeNodeClaims::drop_settled(std::vector<Claim>& claims,
                                           std::uint64_t settled) const {
  if (!settlement_.settled_at) return settled;
  std::erase_if(claims, [&](const Claim& c) {
    Result<model::Allocation> a = decode_allocation_record(c.record, c.ns, c.name, c.uid);
    if (!a.ok()) return false;
    const std::optional<std::uint64_t> at = settlement_.settled_at(*a);
    if (at) settled = std::max(settled, *at);
    return at.has_value();
  });
  return settled;
}

Status KubeNodeClaims::write(const Object& obj, const std::vector<Claim>& claims,
                             std::uint64_t settled, bool* conflict) {
  json meta = {{"name", obj.name},
               {"namespace", options_.ns},
               {"labels", {{"app.kubernetes.io/name", "gapless-claims"}}}};
  if (obj.exists) meta["resourceVersion"] = obj.resource_version;  // the precondition
  json data = {{std::string(kClaimsKey), encode_claims(claims)}};
  if (settled > 0) data[std::string(kSettledKey)] = std::to_string(settled);
  const json body = {
      {"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", meta}, {"data", data}};
  const std::string base = "/api/v1/namespaces/" + url_encode(options_.ns) + "/configmaps";
  Result<ApiResponse> r = obj.exists
                              ? api_.call("PUT", base + "/" + url_encode(obj.name), body.dump())
                              : api_.call("POST", base, body.dump());
  const std::string what = "writing claims object " + options_.ns + "/" + obj.name + ": ";
  if (!r.ok() || !r->ok()) remember(obj.name, std::nullopt);
  if (!r.ok()) return Error{what + r.error()};
  if (r->ok()) {
    // The answer is the object as written: its new resourceVersion is the next precondition.
    const json written = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
    const json* meta = field(written, "metadata");
    const std::string rv = meta != nullptr ? string_field(*meta, "resourceVersion") : "";
    if (rv.empty()) {
      remember(obj.name, std::nullopt);  // no precondition to write with: read next time
    } else {
      remember(obj.name, Object{obj.name, true, rv, claims, settled});
    }
    return Status::Ok();
  }
  // Another writer got there first (update or create), or deleted the object since we read it.
  *conflict = r->status == 409 || (obj.exists && r->status == 404);
  return Error{what + api_error(*r)};
}

bool KubeNodeClaims::alive(const Claim& c, const std::string& node) {
  Result<ApiResponse> r =
      api_.call("GET", "/api/v1/namespaces/" + url_encode(c.ns) + "/pods/" + url_encode(c.name));
  if (!r.ok()) return true;
  if (r->status == 404) return false;
  if (!r->ok()) return true;
  const json pod = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  if (string_field(field(pod, "metadata") ? *field(pod, "metadata") : json(), "uid") != c.uid) {
    return false;  // the name now belongs to another pod
  }
  const json* status = field(pod, "status");
  const std::string phase = status != nullptr ? string_field(*status, "phase") : "";
  if (phase == "Succeeded" || phase == "Failed") return false;
  const json* spec = field(pod, "spec");
  const std::string bound = spec != nullptr ? string_field(*spec, "nodeName") : "";
  return bound.empty() || bound == node;
}

Status KubeNodeClaims::judge(Object& obj, const std::string& node, const Claim& mine,
                             const ClaimCheck& check, bool probe) {
  std::vector<model::Allocation> others;
  std::erase_if(obj.claims, [&](const Claim& c) {
    if (c.holder == mine.holder) return false;
    Result<model::Allocation> a = decode_allocation_record(c.record, c.ns, c.name, c.uid);
    if (!a.ok()) return true;                           // names nothing
    if (a->node != node) return options_.objects == 0;  // kept when another node's (shared)
    if (probe && !alive(c, node)) return true;
    others.push_back(std::move(*a));
    return false;
  });
  Status s = check(others);
  if (s.ok()) return s;
  return Error{"another replica claimed GPUs on node " + node + " first: " + s.error()};
}

void KubeNodeClaims::release(const model::Allocation& ours) {
  const std::string name = claims_object_name(ours.node, options_.objects);
  for (int attempt = 0; attempt < options_.attempts; ++attempt) {
    Result<Object> obj = read(name);
    if (!obj.ok() || !obj->exists) return;
    const std::size_t before = obj->claims.size();
    std::erase_if(obj->claims,
                  [&](const Claim& c) { return same_entry(c, ours.pod_uid, options_.holder); });
    if (obj->claims.size() == before) return;
    bool conflict = false;
    if (write(*obj, obj->claims, obj->settled_through, &conflict).ok() || !conflict) return;
  }
}

// One claim waiting for its node's writer: the claim, its check, and (once written or refused)
// the outcome. Lives on the claiming thread's stack while it waits; woken through its own
// condition variable, so a finished write wakes only the threads it concerns.
struct KubeNodeClaims::Waiter {
  Claim mine;
  std::string node;
  const ClaimCheck& check;
  std::optional<Status> outcome;
  bool writes = false;  // this thread writes the next batch for the node
  std::condition_variable woken;
};

Status KubeNodeClaims::claim(const model::Allocation& ours, const ClaimCheck& check) {
  Waiter me{{ours.pod_uid, ours.pod_ns, ours.pod_name, options_.holder,
             encode_allocation_record(ours), 0},
            ours.node,
            check,
            std::nullopt,
            false,
            {}};
  const std::string name = claims_object_name(ours.node, options_.objects);
  std::unique_lock lock(writers_mu_);
  ObjectWriter& w = writers_[name];
  w.waiting.push_back(&me);
  if (w.writing) {
    me.woken.wait(lock, [&] { return me.outcome || me.writes; });
    if (me.outcome) return *me.outcome;
  }
  // This thread writes for every claim in the object that waits now, its own among them.
  ObjectWriter& writer = writers_[name];
  writer.writing = true;
  std::vector<Waiter*> batch;
  batch.swap(writer.waiting);
  lock.unlock();
  std::vector<Status> outcomes = write_claims(name, batch);
  lock.lock();
  ObjectWriter& after = writers_[name];
  if (after.waiting.empty()) {
    writers_.erase(name);
  } else {
    // Hand the next write to the oldest waiting claim first: the object's next write starts
    // before the threads of this batch are scheduled to answer their binds. (With one shared
    // condition variable every waiting claim on every node woke for every write; on a busy
    // machine the next writer then started tens of milliseconds late.)
    after.waiting.front()->writes = true;
    after.waiting.front()->woken.notify_one();
  }
  // Notified under the lock: a waiter returns (and its condition variable goes) only after
  // taking the lock, so never while it is being notified.
  for (std::size_t i = 0; i < batch.size(); ++i) {
    batch[i]->outcome = std::move(outcomes[i]);
    if (batch[i] != &me) batch[i]->woken.notify_one();
  }
  return *me.outcome;
}

std::size_t KubeNodeClaims::waiting_claims(const std::string& node) const {
  std::lock_guard lock(writers_mu_);
  auto it = writers_.find(claims_object_name(node, options_.objects));
  if (it == writers_.end()) return 0;
  return std::count_if(it->second.waiting.begin(), it->second.waiting.end(),
                       [&](const Waiter* w) { return w->node == node; });
}

std::vector<Status> KubeNodeClaims::write_claims(const std::string& name,
                                                 const std::vector<Waiter*>& batch) {
  std::vector<std::optional<Status>> out(batch.size());
  auto undecided = [&] {
    return std::any_of(out.begin(), out.end(), [](const auto& o) { return !o.has_value(); });
  };
  for (int attempt = 0; attempt < options_.attempts && undecided(); ++attempt) {
    // First over what we last wrote; after a conflict over what is there now.
    Result<Object> obj = attempt == 0 ? remembered_or_read(name) : read(name);
    // Claims dropped as settled are judged through this replica's model: only once it has them.
    if (Status s = obj.ok() ? caught_up(obj->settled_through) : Error{obj.error()}; !s.ok()) {
      for (auto& o : out) {
        if (!o) o = Error{s.error()};
      }
      break;
    }
    const std::int64_t t = now();
    // Expired claims and our own previous claims for these pods are dropped.
    std::erase_if(obj->claims, [&](const Claim& c) {
      return t - c.at_ms >= options_.ttl.count() ||
             std::any_of(batch.begin(), batch.end(), [&](const Waiter* w) {
               return same_entry(c, w->mine.uid, w->mine.holder);
             });
    });
    const std::uint64_t settled = drop_settled(obj->claims, obj->settled_through);
    std::vector<std::size_t> adding;  // indexes into batch judged to fit, in order
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (out[i]) continue;
      const std::string& node = batch[i]->node;
      Status verdict = judge(*obj, node, batch[i]->mine, batch[i]->check, /*probe=*/false);
      const auto full = [&] { return obj->claims.size() + adding.size() >= max_claims(); };
      if (!verdict.ok() || full()) {
        // Some claims in the way may be dead: read their pods back, then judge again.
        verdict = judge(*obj, node, batch[i]->mine, batch[i]->check, /*probe=*/true);
        if (verdict.ok() && full()) {
          verdict = Error{"claims object " + name + " (node " + node + ") has " +
                          std::to_string(obj->claims.size() + adding.size()) +
                          " live claims (the most is " + std::to_string(max_claims()) + ")"};
        }
        if (!verdict.ok()) {
          out[i] = std::move(verdict);
          continue;
        }
      }
      adding.push_back(i);
    }
    if (adding.empty()) break;
    std::vector<Claim> next = obj->claims;
    for (std::size_t i : adding) {
      next.push_back(batch[i]->mine);
      next.back().at_ms = t;
    }
    bool conflict = false;
    Status s = write(*obj, next, settled, &conflict);
    if (s.ok() || !conflict) {
      for (std::size_t i : adding) out[i] = s;
    }
  }
  std::vector<Status> decided;
  for (auto& o : out) {
    decided.push_back(o ? std::move(*o)
                        : Error{"claims object " + name + " kept changing under us (" +
                                std::to_string(options_.attempts) + " conflicting writes)"});
  }
  return decided;
}

}  // namespace gapless::k8s
