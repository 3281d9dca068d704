// A record on the watch against a local reservation (a bind in flight, not yet seen bound): the
// API server's record wins, the reservation is dropped and reported, nothing is fenced
// (docs/high-availability.md).
#include <catch2/catch.hpp>

#include <mutex>

#include "gapless/k8s/cluster_sync.h"
#include "k8s_objects.h"

using namespace gapless;
using k8s::testing::bound_pod;
using k8s::testing::topology_node;
using k8s::testing::whole;

namespace {

struct Harness {
  model::Cluster cluster;
  std::mutex mu;
  std::vector<std::string> dropped;  // "pod@node"
  std::vector<std::string> bad;
  k8s::ClusterSync sync{hooks()};

  k8s::ClusterSyncHooks hooks() {
    k8s::ClusterSyncHooks h;
    h.mutate = [this](const std::function<void(model::Cluster&)>& f) {
      std::lock_guard lock(mu);
      f(cluster);
    };
    h.on_reservation_dropped = [this](const std::string& pod, const std::string& node,
                                      const std::string&) { dropped.push_back(pod + "@" + node); };
    h.on_bad_record = [this](const std::string& pod, const std::string&, const std::string&) {
      bad.push_back(pod);
    };
    return h;
  }
  // What Extender::bind does before the Binding: commit, unseen by the watch.
  void reserve(const model::Allocation& a) { REQUIRE(cluster.commit(a).ok()); }
};

}  // namespace

TEST_CASE("a bound pod's record takes GPUs from a local reservation: the reservation is dropped",
          "[k8s][ha]") {
  Harness h;
  h.sync.replace_nodes({topology_node("n1", 4)});
  h.sync.replace_pods({});
  h.reserve(whole("mine", "n1", {0, 1}));
  h.reserve(whole("other", "n1", {3}));  // in flight too, but out of the way

  h.sync.apply_pod("MODIFIED", bound_pod(whole("theirs", "n1", {1, 2})));
  CHECK(h.cluster.allocation("theirs") != nullptr);
  CHECK(h.cluster.allocation("mine") == nullptr);
  CHECK(h.cluster.allocation("other") != nullptr);
  CHECK(h.dropped == std::vector<std::string>{"ml/pod-mine@n1"});
  CHECK(h.sync.reservations_dropped() == 1);
  CHECK(h.bad.empty());
  CHECK_FALSE(h.cluster.find_node("n1")->fenced());

  SECTION("two confirmed records on the same GPUs still fence the node") {
    h.sync.apply_pod("MODIFIED", bound_pod(whole("late", "n1", {2})));
    CHECK(h.bad == std::vector<std::string>{"ml/pod-late"});
    CHECK(h.cluster.find_node("n1")->fenced());
    CHECK(h.sync.reservations_dropped() == 1);
  }
  SECTION("a reservation the watch confirmed is no longer a reservation") {
    h.sync.apply_pod("MODIFIED", bound_pod(whole("other", "n1", {3})));
    h.sync.apply_pod("MODIFIED", bound_pod(whole("late", "n1", {3})));
    CHECK(h.cluster.allocation("other") != nullptr);
    CHECK(h.bad == std::vector<std::string>{"ml/pod-late"});
  }
}

TEST_CASE("the same pod bound with other GPUs than reserved: the record replaces them",
          "[k8s][ha]") {
  Harness h;
  h.sync.replace_nodes({topology_node("n1", 4)});
  h.sync.replace_pods({});
  h.reserve(whole("p", "n1", {0}));
  h.sync.apply_pod("MODIFIED", bound_pod(whole("p", "n1", {2})));
  REQUIRE(h.cluster.allocation("p") != nullptr);
  CHECK(h.cluster.allocation("p")->gpus.at(0).index == 2);
  CHECK(h.sync.reservations_dropped() == 1);
  CHECK(h.bad.empty());
}
