// Claims: how several extender replicas never hand out the same GPU. Before a Binding is posted,
// the GPUs, MIG slices and shares chosen for the pod are written into a claim object, a ConfigMap
// in the extender's namespace, with its metadata.resourceVersion as a precondition (an update
// from a stale read answers 409 Conflict). Each write re-reads the object, checks the other
// writers' live claims on the same node against what we chose, and only then adds ours; so of two
// replicas that chose the same GPU, the second to write sees the first's claim and fails
// (docs/high-availability.md). The claims of all nodes share a few objects (`objects`, one by
// default), so claims on different nodes made at once go in one write; or each node has its own
// (`objects` = 0, `gapless-claims-<node>`). Every replica must use the same layout.
//
// A claim lives until it is settled: the pod informer has delivered the pod bound with what it
// claimed (or gone), so every replica's model will count it (or its end) once its own informer
// has come as far. A write
// drops settled claims and records in the object the resourceVersion through which they are
// settled; a replica that reads the object judges claims only once its pod informer has reached
// that resourceVersion (else its model could lack a bound pod whose claim is gone). Unsettled
// claims live until their TTL passes (by then the pod's Binding has landed or failed), or until
// found dead: when another writer's claim stands in our way, its pod is read back and the claim
// dropped if the pod is gone, finished, or bound to another node.
//
// Thread-safety: claim and release may run concurrently (each is a read-check-write loop;
// claims on one node share one loop at a time, below).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gapless/k8s/api_client.h"
#include "gapless/model/allocation.h"
#include "gapless/model/result.h"

namespace gapless::k8s {

// The ConfigMap data key holding the claims (a JSON array of Claim).
inline constexpr std::string_view kClaimsKey = "claims";
// The data key holding the resourceVersion (decimal) through which dropped claims are settled.
inline constexpr std::string_view kSettledKey = "settledThrough";

struct Claim {
  std::string uid, ns, name;  // the pod
  std::string holder;         // the replica that claimed (its pod name)
  std::string record;         // what it claimed: a gapless.io/allocation record
  std::int64_t at_ms = 0;     // when (Unix ms, the holder's clock)
  bool operator==(const Claim&) const = default;
};

// [{"uid":..,"ns":..,"name":..,"holder":..,"record":..,"at":ms}, ...]. Decoding rejects
// anything else (the caller then treats the object as unreadable, never as empty).
std::string encode_claims(const std::vector<Claim>& claims);
Result<std::vector<Claim>> decode_claims(std::string_view text);

// The ConfigMap name for a node's claims among `objects` shared objects: "gapless-claimset-<i>",
// i a hash of the node name (the same in every replica) modulo `objects`. With `objects` = 0 the
// node's own object: "gapless-claims-<node>", or, when that is longer than an object name may be,
// a prefix of it and a hash of the node name.
std::string claims_object_name(const std::string& node, std::size_t objects = 0);

// How a replica knows which claims are settled (see the file comment). Both are optional: without
// them no claim is dropped before its TTL, and an object naming a settled resourceVersion cannot
// be judged (claims there fail).
struct ClaimSettlement {
  // The resourceVersion of the pod event through which this replica's model counts `claimed` as
  // a bound pod's record (the watch delivered it with exactly these grants), or no longer counts
  // the pod at all (it finished or was deleted), else nullopt.
  std::function<std::optional<std::uint64_t>(const model::Allocation& claimed)> settled_at;
  // How far this replica's pod informer has delivered events into its model (0: unknown).
  std::function<std::uint64_t()> seen_through;
};

// Judges the other writers' live claims on the node against ours (already counted in the
// caller's model): Ok when ours fits besides all of them, else why not.
using ClaimCheck = std::function<Status(const std::vector<model::Allocation>& others)>;

class NodeClaims {
 public:
  virtual ~NodeClaims() = default;
  // Makes `ours` durable as a claim, or fails (a conflict, or the API server unreachable);
  // on failure no claim of ours was added.
  virtual Status claim(const model::Allocation& ours, const ClaimCheck& check) = 0;
  // Removes our claim for the pod (its bind failed). Best effort: a claim left behind expires.
  virtual void release(const model::Allocation& ours) = 0;
};

struct ClaimOptions {
  std::string ns = "gapless-system";  // where the claim objects live
  std::string holder;                 // this replica's name (unique among replicas)
  // Longer than a Binding can take to land (API request timeout) plus informer lag.
  std::chrono::milliseconds ttl{std::chrono::minutes(2)};
  // Objects the claims of all nodes are spread over; 0: one per node (docs/high-availability.md).
  std::size_t objects = 1;
  // Live claims per object; more fails the claim. 0: 256 in a node's own object, 2,048 in a
  // shared one (about 350 KB, well within a ConfigMap's 1 MiB).
  std::size_t max_claims = 0;
  // How long a claim waits for this replica's pod informer to reach an object's settled
  // resourceVersion before it fails.
  std::chrono::milliseconds informer_wait{std::chrono::seconds(2)};
  int attempts = 10;             // read-check-write rounds before a 409 storm fails the claim
  // The clock claims are stamped and expired with (Unix ms); null: the system clock.
  std::function<std::int64_t()> now_ms;
};

// The claims as ConfigMaps through the Kubernetes API (get, create, update). A node's object is
// remembered as this replica last wrote it, so the next claim there writes without reading
// first: one request per claim while no other replica writes the node's claims. If one did, the
// write's precondition fails (409) and the claim reads the object and judges it as always.
// Claims on one node made at once (kube-scheduler binds many pods at once, and packing sends
// them to the same nodes) are written together: while one write for a node is in flight, the
// claims that arrive wait and go in the next write, each judged on its own.
class KubeNodeClaims final : public NodeClaims {
 public:
  KubeNodeClaims(ApiTransport& api, ClaimOptions options);
  Status claim(const model::Allocation& ours, const ClaimCheck& check) override;
  void release(const model::Allocation& ours) override;
  // Set once, before the first claim (the informers it reads start after construction).
  void set_settlement(ClaimSettlement settlement) { settlement_ = std::move(settlement); }
  // Claims on `node` waiting for the write in flight to its object.
  std::size_t waiting_claims(const std::string& node) const;

 private:
  struct Object {  // one read (or our last write) of a claim object
    std::string name;
    bool exists = false;
    std::string resource_version;
    std::vector<Claim> claims;
    std::uint64_t settled_through = 0;  // kSettledKey
  };
  // At most this many objects are remembered; beyond, the memory starts over.
  static constexpr std::size_t kMaxRemembered = 100'000;
  Result<Object> read(const std::string& name);
  // The object as we last wrote it, else read.
  Result<Object> remembered_or_read(const std::string& name);
  // Writes `claims` over what `obj` was read as, and remembers what was written; 409 (or 404
  // for an object read as existing: deleted since) -> Error with conflict set.
  Status write(const Object& obj, const std::vector<Claim>& claims, std::uint64_t settled,
               bool* conflict);
  void remember(const std::string& name, std::optional<Object> obj);
  struct Waiter;  // a claim waiting for its object's writer
  // The read-judge-write rounds for claims in one object, written in one request; each one's
  // outcome, in order.
  std::vector<Status> write_claims(const std::string& name, const std::vector<Waiter*>& batch);
  // Ok once this replica's pod informer has delivered everything through `rv`.
  Status caught_up(std::uint64_t rv) const;
  // Drops the claims whose pods this replica has seen bound as claimed; the resourceVersion
  // through which those are settled (at least `settled`).
  std::uint64_t drop_settled(std::vector<Claim>& claims, std::uint64_t settled) const;
  // Whether the claim's pod may still take the node's GPUs (not gone, finished or bound
  // elsewhere). Unsure (API unreachable) counts as alive.
  bool alive(const Claim& c, const std::string& node);
  // Runs `check` on the other replicas' claims on `node` in `obj` (undecodable ones are dropped;
  // with `probe`, so are those on the node whose pod is not alive). Our own replica's claims are
  // not judged: our model holds them while their binds are in flight.
  Status judge(Object& obj, const std::string& node, const Claim& mine, const ClaimCheck& check,
               bool probe);
  std::size_t max_claims() const;
  std::int64_t now() const;

  ApiTransport& api_;
  const ClaimOptions options_;
  ClaimSettlement settlement_;
  std::mutex remembered_mu_;
  std::unordered_map<std::string, Object> remembered_;  // by object name

  struct ObjectWriter {
    bool writing = false;          // a thread is writing the object, or is told to
    std::vector<Waiter*> waiting;  // claims for the next write
  };
  mutable std::mutex writers_mu_;  // writers_, and each Waiter's outcome and writes
  // By object name; only while claims are made.
  std::unordered_map<std::string, ObjectWriter> writers_;
};

}  // namespace gapless::k8s
