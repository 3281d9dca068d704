// Claims: how several extender replicas never hand out the same GPU. Before a Binding is posted,
// the GPUs, MIG slices and shares chosen for the pod are written into a per-node claim object,
// the ConfigMap `gapless-claims-<node>` in the extender's namespace, with its
// metadata.resourceVersion as a precondition (an update from a stale read answers 409 Conflict).
// Each write re-reads the object, checks the other writers' live claims against what we chose,
// and only then adds ours; so of two replicas that chose the same GPU, the second to write sees
// the first's claim and fails (README, "High availability").
//
// A claim lives until its TTL passes (by then the pod's Binding has landed or failed, and every
// replica's informer shows the bound pod's allocation record), or until it is found dead: when
// another writer's claim stands in our way, its pod is read back and the claim dropped if the pod
// is gone, finished, or bound to another node. Writes drop expired claims, so the object stays
// small.
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

// The ConfigMap name for a node: "gapless-claims-<node>", or, when that is longer than an object
// name may be, a prefix of it and a hash of the node name.
std::string claims_object_name(const std::string& node);

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
  std::size_t max_claims = 256;  // live claims per node object; more fails the claim
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
  // Claims on `node` waiting for the write in flight there.
  std::size_t waiting_claims(const std::string& node) const;

 private:
  struct Object {  // one read (or our last write) of a node's claim object
    std::string node, name;
    bool exists = false;
    std::string resource_version;
    std::vector<Claim> claims;
  };
  // At most this many nodes' objects are remembered; beyond, the memory starts over.
  static constexpr std::size_t kMaxRemembered = 100'000;
  Result<Object> read(const std::string& node);
  // The object as we last wrote it, else read.
  Result<Object> remembered_or_read(const std::string& node);
  // Writes `claims` over what `obj` was read as, and remembers what was written; 409 (or 404
  // for an object read as existing: deleted since) -> Error with conflict set.
  Status write(const Object& obj, const std::vector<Claim>& claims, bool* conflict);
  void remember(const std::string& node, std::optional<Object> obj);
  struct Waiter;  // a claim waiting for its node's writer
  // The read-judge-write rounds for claims on one node, written in one request; each one's
  // outcome, in order.
  std::vector<Status> write_claims(const std::string& node, const std::vector<Waiter*>& batch);
  // Whether the claim's pod may still take the node's GPUs (not gone, finished or bound
  // elsewhere). Unsure (API unreachable) counts as alive.
  bool alive(const Claim& c, const std::string& node);
  // Runs `check` on the other replicas' claims in `obj` (undecodable ones are dropped; with
  // `probe`, so are those whose pod is not alive). Our own replica's claims are not judged: our
  // model holds them while their binds are in flight.
  Status judge(Object& obj, const Claim& mine, const ClaimCheck& check, bool probe);
  std::int64_t now() const;

  ApiTransport& api_;
  const ClaimOptions options_;
  std::mutex remembered_mu_;
  std::unordered_map<std::string, Object> remembered_;  // by node

  struct NodeWriter {
    bool writing = false;          // a thread is writing the node's object, or is told to
    std::vector<Waiter*> waiting;  // claims for the next write
  };
  mutable std::mutex writers_mu_;  // writers_, and each Waiter's outcome and writes
  std::unordered_map<std::string, NodeWriter> writers_;  // by node; only while claims are made
};

}  // namespace gapless::k8s
