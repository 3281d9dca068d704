#include "gapless/k8s/cluster_sync.h"

#include <catch2/catch.hpp>
#include <functional>

#include "k8s_objects.h"

using gapless::k8s::ClusterSync;
using gapless::k8s::ClusterSyncHooks;
using gapless::k8s::encode_allocation_record;
using gapless::k8s::testing::bound_pod;
using gapless::k8s::testing::pod_object;
using gapless::k8s::testing::topology_node;
using gapless::k8s::testing::whole;
using gapless::model::Allocation;
using gapless::model::Cluster;
using gapless::model::GpuGrant;
using gapless::model::MigGrant;
using gapless::model::Node;
using nlohmann::json;

namespace {

// A model guarded like the extender's, plus what ClusterSync reported.
struct Harness {
  Cluster cluster;
  std::mutex mu;
  std::vector<std::string> logs;
  std::vector<std::vector<std::string>> bad;  // {pod, node, why}
  std::vector<std::string> lifted;            // nodes whose fence was lifted
  ClusterSync sync{hooks()};

  ClusterSyncHooks hooks() {
    ClusterSyncHooks h;
    h.mutate = [this](const std::function<void(Cluster&)>& f) {
      std::lock_guard lock(mu);
      f(cluster);
    };
    h.on_bad_record = [this](const std::string& pod, const std::string& node,
                             const std::string& why) {
      bad.push_back({pod, node, why});
    };
    h.on_fence_lifted = [this](const std::string& node, const std::string&) {
      lifted.push_back(node);
    };
    h.log = [this](const std::string& m) { logs.push_back(m); };
    return h;
  }
  bool used(const std::string& node, int gpu) {
    return !cluster.find_node(node)->gpus.at(gpu).used.idle();
  }
};

std::vector<Allocation> allocations(const Cluster& c) {
  std::vector<Allocation> out;
  for (const Allocation* a : c.allocations()) out.push_back(*a);
  return out;
}

}  // namespace

TEST_CASE("sync: node updates keep allocations; deletion drops them", "[k8s][sync]") {
  Harness h;
  h.sync.replace_nodes({topology_node("n1", 4), topology_node("n2", 2)});
  h.sync.apply_pod("ADDED", bound_pod(whole("u1", "n1", {0, 1})));
  REQUIRE(h.cluster.allocation("u1") != nullptr);

  // The topology annotation changes (GPUs added): the pod keeps GPUs 0 and 1.
  h.sync.apply_node("MODIFIED", topology_node("n1", 8));
  CHECK(h.cluster.find_node("n1")->gpus.size() == 8);
  CHECK(h.cluster.allocation("u1") != nullptr);
  CHECK(h.used("n1", 0));
  CHECK(h.used("n1", 1));
  CHECK_FALSE(h.used("n1", 2));
  CHECK_FALSE(h.cluster.find_node("n1")->fenced());

  // A malformed annotation: logged, the previous inventory stays, and so does the allocation.
  json broken = topology_node("n1", 2);
  broken["metadata"]["annotations"]["gapless.io/gpu-topology"] = R"({"version":1,"gpus":[{}]})";
  h.sync.apply_node("MODIFIED", broken);
  CHECK(h.cluster.find_node("n1")->gpus.size() == 8);
  CHECK(h.used("n1", 1));
  REQUIRE_FALSE(h.logs.empty());
  CHECK(h.logs.back().find("keeping the node's previous inventory") != std::string::npos);

  h.sync.apply_node("ADDED", topology_node("n3", 1));
  CHECK(h.cluster.node_count() == 3);
  h.sync.apply_node("DELETED", topology_node("n1", 8));
  CHECK(h.cluster.find_node("n1") == nullptr);
  CHECK(h.cluster.allocation("u1") == nullptr);

  // A relist without n2: it was deleted while we were not watching.
  h.sync.replace_nodes({topology_node("n3", 1)});
  CHECK(h.cluster.node_count() == 1);
  CHECK(h.cluster.find_node("n3") != nullptr);
}

// A compromised agent on another node rewrites n1's annotation to claim 8 GPUs; n1's kubelet
// (the only writer of its status under NodeRestriction) lists 4: the claim is logged and ignored.
TEST_CASE("sync: an annotation claiming more GPUs than the node's kubelet lists is not trusted",
          "[k8s][sync]") {
  Harness h;
  json real = topology_node("n1", 4);
  real["status"]["capacity"] = {{"nvidia.com/gpu", "4"}};
  h.sync.replace_nodes({real});
  REQUIRE(h.cluster.find_node("n1")->gpus.size() == 4);

  json forged = topology_node("n1", 8);
  forged["status"]["capacity"] = {{"nvidia.com/gpu", "4"}};
  h.sync.apply_node("MODIFIED", forged);
  CHECK(h.cluster.find_node("n1")->gpus.size() == 4);
  REQUIRE_FALSE(h.logs.empty());
  CHECK(h.logs.back().find("lists 8 GPUs outside MIG mode, but the node's kubelet reports "
                           "status.capacity nvidia.com/gpu 4") != std::string::npos);
  CHECK(h.logs.back().find("keeping the node's previous inventory") != std::string::npos);

  // A node first seen with such a claim is left out until it is fixed.
  json newcomer = topology_node("n2", 8);
  newcomer["status"]["capacity"] = {{"nvidia.com/gpu", "2"}};
  h.sync.apply_node("ADDED", newcomer);
  CHECK(h.cluster.find_node("n2") == nullptr);
}

TEST_CASE("sync: records are restored; finished and deleted pods free their GPUs", "[k8s][sync]") {
  Harness h;
  h.sync.replace_nodes({topology_node("n1", 8)});
  // Bound by anyone (another run of Gapless, a replica): the record is what counts.
  h.sync.apply_pod("ADDED", bound_pod(whole("u1", "n1", {0})));
  h.sync.apply_pod("ADDED", bound_pod(whole("u2", "n1", {1, 2})));
  h.sync.apply_pod("ADDED", bound_pod(whole("u3", "n1", {3})));
  CHECK(h.cluster.allocation_count() == 3);
  CHECK(*h.cluster.allocation("u2") == whole("u2", "n1", {1, 2}));

  // Being deleted still runs: still counted.
  json terminating = bound_pod(whole("u1", "n1", {0}));
  terminating["metadata"]["deletionTimestamp"] = "2025-01-15T09:12:45Z";
  h.sync.apply_pod("MODIFIED", terminating);
  CHECK(h.used("n1", 0));

  h.sync.apply_pod("MODIFIED", bound_pod(whole("u2", "n1", {1, 2}), "Succeeded"));
  CHECK(h.cluster.allocation("u2") == nullptr);
  CHECK_FALSE(h.used("n1", 1));
  CHECK_FALSE(h.used("n1", 2));
  h.sync.apply_pod("DELETED", terminating);
  CHECK_FALSE(h.used("n1", 0));
  h.sync.apply_pod("MODIFIED", bound_pod(whole("u3", "n1", {3}), "Failed"));
  CHECK(h.cluster.allocation_count() == 0);
  CHECK(h.sync.bad_records() == 0);
}

TEST_CASE("sync: pods bound without a record are ignored and logged once", "[k8s][sync]") {
  Harness h;
  h.sync.replace_nodes({topology_node("n1", 8)});
  h.sync.apply_pod("ADDED", pod_object("other", "u9", "n1"));
  h.sync.apply_pod("MODIFIED", pod_object("other", "u9", "n1"));
  CHECK(h.cluster.allocation_count() == 0);
  REQUIRE(h.logs.size() == 1);
  CHECK(h.logs[0].find("ml/other") != std::string::npos);
  // A pod without GPUs is not worth a line.
  json cpu = pod_object("web", "u10", "n1");
  cpu["spec"]["containers"][0]["resources"] = json::object();
  h.sync.apply_pod("ADDED", cpu);
  CHECK(h.logs.size() == 1);
}

TEST_CASE("sync: a bind's commit and the pod's later events agree", "[k8s][sync]") {
  Harness h;
  h.sync.replace_nodes({topology_node("n1", 8)});
  const Allocation a = whole("u1", "n1", {4, 5});
  // The extender commits at bind, before the API call.
  h.sync.replace_pods({});
  REQUIRE(h.cluster.commit(a).ok());
  // An update of the still-pending pod (say, a status change) must not free the reservation.
  h.sync.apply_pod("MODIFIED", pod_object(a.pod_name, a.pod_uid, ""));
  CHECK(h.cluster.allocation("u1") != nullptr);
  // The binding lands: same node, same record -> nothing to do.
  h.sync.apply_pod("MODIFIED", bound_pod(a));
  CHECK(h.cluster.allocation_count() == 1);
  CHECK(*h.cluster.allocation("u1") == a);
  CHECK(h.sync.bad_records() == 0);
  CHECK_FALSE(h.cluster.find_node("n1")->fenced());
}

TEST_CASE("sync: an unusable record fences its node and frees nothing", "[k8s][sync]") {
  struct Case {
    const char* name;
    json record;
    const char* why;
  };
  const Case cases[] = {
      {"garbage", "{not json", ""},
      {"unknown version", R"({"v":9,"node":"n1","gpus":[{"index":3}]})", ""},
      {"GPU that does not exist", R"({"v":1,"node":"n1","gpus":[{"index":12}]})", "does not exist"},
      {"GPU already held", R"({"v":1,"node":"n1","gpus":[{"index":0}]})", "not free"},
      {"another node", R"({"v":1,"node":"n2","gpus":[{"index":3}]})", "names node n2"},
      {"not a string", json{{"v", 1}}, "must be a string"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    Harness h;
    h.sync.replace_nodes({topology_node("n1", 8), topology_node("n2", 8)});
    h.sync.replace_pods({bound_pod(whole("good", "n1", {0}))});
    json bad = pod_object("bad", "u-bad", "n1", c.record);
    h.sync.apply_pod("ADDED", bad);

    const Node* n1 = h.cluster.find_node("n1");
    CHECK(n1->fenced());
    CHECK(n1->fence_reason.find("ml/bad") != std::string::npos);
    CHECK(h.sync.bad_records() == 1);
    REQUIRE(h.bad.size() == 1);
    CHECK(h.bad[0][0] == "ml/bad");
    CHECK(h.bad[0][1] == "n1");
    CHECK(h.bad[0][2].find(c.why) != std::string::npos);
    // Nothing was freed, and the bad pod holds nothing.
    CHECK(h.cluster.allocation("good") != nullptr);
    CHECK(h.used("n1", 0));
    CHECK(h.cluster.allocation("u-bad") == nullptr);
    CHECK_FALSE(h.cluster.find_node("n2")->fenced());

    // The pod's next status update is the same record: not counted again.
    h.sync.apply_pod("MODIFIED", bad);
    CHECK(h.sync.bad_records() == 1);
    // A relist keeps the good allocation too.
    h.sync.replace_pods({bound_pod(whole("good", "n1", {0})), bad});
    CHECK(h.cluster.allocation("good") != nullptr);
    CHECK(h.sync.bad_records() == 1);
  }
}

TEST_CASE("sync: a relist releases the pods that vanished, and only those", "[k8s][sync]") {
  Harness h;
  h.sync.replace_nodes({topology_node("n1", 8)});
  const Allocation stays = whole("u1", "n1", {0});
  const Allocation deleted = whole("u2", "n1", {1});
  const Allocation finished = whole("u3", "n1", {2});
  h.sync.replace_pods({bound_pod(stays), bound_pod(deleted), bound_pod(finished)});
  CHECK(h.cluster.allocation_count() == 3);
  // A bind in flight: committed, the pod still pending in the list.
  const Allocation binding = whole("u4", "n1", {3});
  REQUIRE(h.cluster.commit(binding).ok());

  h.sync.replace_pods({bound_pod(stays), bound_pod(finished, "Succeeded"),
                       pod_object(binding.pod_name, binding.pod_uid, "")});
  CHECK(h.cluster.allocation("u1") != nullptr);
  CHECK(h.cluster.allocation("u2") == nullptr);
  CHECK(h.cluster.allocation("u3") == nullptr);
  CHECK(h.cluster.allocation("u4") != nullptr);
  CHECK(h.used("n1", 0));
  CHECK_FALSE(h.used("n1", 1));
  CHECK_FALSE(h.used("n1", 2));
  CHECK(h.used("n1", 3));
}

TEST_CASE("sync: pods listed before their nodes wait for them", "[k8s][sync]") {
  Harness h;
  h.sync.replace_pods({bound_pod(whole("u1", "n1", {2}))});
  CHECK_FALSE(h.sync.synced());
  CHECK(h.cluster.allocation_count() == 0);
  CHECK(h.sync.bad_records() == 0);
  h.sync.replace_nodes({topology_node("n1", 8)});
  CHECK(h.sync.synced());
  CHECK(h.cluster.allocation("u1") != nullptr);
  CHECK(h.used("n1", 2));
  // Same for a node that arrives by event.
  h.sync.apply_pod("ADDED", bound_pod(whole("u2", "n9", {0})));
  h.sync.apply_node("ADDED", topology_node("n9", 1));
  CHECK(h.cluster.allocation("u2") != nullptr);
}

TEST_CASE("sync: a restart rebuilds exactly the model that binds built", "[k8s][sync]") {
  const std::vector<json> nodes = {topology_node("h1", 8), topology_node("h2", 8),
                                   topology_node("a1", 2, "NVIDIA-A100-SXM4-80GB", true)};
  std::vector<Allocation> binds = {whole("p1", "h1", {0, 1}),
                                   whole("p2", "h2", {0, 1, 2, 3, 4, 5, 6, 7})};
  Allocation share = whole("p3", "h1", {});
  share.gpus = {{2, "h1-GPU-2", 8192, 300}, {3, "h1-GPU-3", 8192, 300}};
  Allocation share2 = whole("p4", "h1", {});
  share2.gpus = {{2, "h1-GPU-2", 20480, 500}};
  Allocation mig = whole("p5", "a1", {});
  mig.mig = {MigGrant{0, "3g.40gb", 4}, MigGrant{0, "1g.10gb", 0}, MigGrant{1, "7g.80gb", 0}};
  binds.insert(binds.end(), {share, share2, mig});

  // The running extender: nodes from the informer, allocations committed at bind, then the
  // pods' MODIFIED events carrying the records the binder wrote.
  Harness live;
  live.sync.replace_nodes(nodes);
  live.sync.replace_pods({});
  std::vector<json> pods;
  for (const Allocation& a : binds) {
    REQUIRE(live.cluster.commit(a).ok());
    pods.push_back(bound_pod(a));
    live.sync.apply_pod("MODIFIED", pods.back());
  }
  pods.push_back(pod_object("pending", "p6", ""));

  // A fresh process lists the same objects.
  Harness restarted;
  restarted.sync.replace_nodes(nodes);
  restarted.sync.replace_pods(pods);
  CHECK(restarted.sync.synced());
  CHECK(restarted.sync.bad_records() == 0);
  CHECK(allocations(restarted.cluster) == allocations(live.cluster));
  CHECK(allocations(restarted.cluster).size() == binds.size());
  for (const Node* n : live.cluster.nodes()) {
    INFO(n->name);
    const Node* r = restarted.cluster.find_node(n->name);
    REQUIRE(r != nullptr);
    CHECK_FALSE(r->fenced());
    REQUIRE(r->gpus.size() == n->gpus.size());
    for (std::size_t i = 0; i < n->gpus.size(); ++i) CHECK(r->gpus[i].used == n->gpus[i].used);
    CHECK(r->mig_pool == n->mig_pool);
  }
  CHECK(live.cluster.find_node("h1")->gpus[2].used.shared_pods == 2);
  CHECK(live.cluster.find_node("a1")->gpus[0].used.mig_slices_used != 0);
}

TEST_CASE("sync: a fence set for a bad record is lifted when the record goes or is fixed",
          "[k8s][sync]") {
  const json garbage = "{not json";
  const json fixed = encode_allocation_record(whole("u-bad", "n1", {3}));
  struct Case {
    const char* name;
    std::function<void(Harness&, const json& bad)> cure;
  };
  const Case cases[] = {
      {"deleted", [](Harness& h, const json& bad) { h.sync.apply_pod("DELETED", bad); }},
      {"finished",
       [](Harness& h, json bad) {
         bad["status"]["phase"] = "Succeeded";
         h.sync.apply_pod("MODIFIED", bad);
       }},
      {"gone at a relist",
       [](Harness& h, const json&) { h.sync.replace_pods({bound_pod(whole("good", "n1", {0}))}); }},
      {"record fixed",
       [&](Harness& h, json bad) {
         bad["metadata"]["annotations"]["gapless.io/allocation"] = fixed;
         h.sync.apply_pod("MODIFIED", bad);
       }},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    Harness h;
    h.sync.replace_nodes({topology_node("n1", 8)});
    h.sync.replace_pods({bound_pod(whole("good", "n1", {0}))});
    const json bad = pod_object("bad", "u-bad", "n1", garbage);
    h.sync.apply_pod("ADDED", bad);
    REQUIRE(h.cluster.find_node("n1")->fenced());

    c.cure(h, bad);
    CHECK_FALSE(h.cluster.find_node("n1")->fenced());
    CHECK(h.sync.fences_lifted() == 1);
    REQUIRE(h.lifted.size() == 1);
    CHECK(h.lifted[0] == "n1");
    CHECK(h.logs.back().find("node n1 unfenced") != std::string::npos);
    CHECK(h.cluster.allocation("good") != nullptr);
  }
}

TEST_CASE("sync: a fence stays while another bad record, or another reason, holds it",
          "[k8s][sync]") {
  Harness h;
  h.sync.replace_nodes({topology_node("n1", 8)});
  const json bad1 = pod_object("bad1", "u-bad1", "n1", "{not json");
  const json bad2 = pod_object("bad2", "u-bad2", "n1", "{nor this");
  h.sync.apply_pod("ADDED", bad1);
  h.sync.apply_pod("ADDED", bad2);
  h.sync.apply_pod("DELETED", bad1);
  CHECK(h.cluster.find_node("n1")->fenced());
  CHECK(h.sync.fences_lifted() == 0);
  h.sync.apply_pod("DELETED", bad2);
  CHECK_FALSE(h.cluster.find_node("n1")->fenced());
  CHECK(h.sync.fences_lifted() == 1);

  // A fence for another reason (here set by hand) is not a record's to lift.
  h.sync.apply_pod("ADDED", pod_object("bad3", "u-bad3", "n1", "{again"));
  h.cluster.fence("n1", "inventory changed under allocations");
  h.sync.apply_pod("DELETED", pod_object("bad3", "u-bad3", "n1", "{again"));
  CHECK(h.cluster.find_node("n1")->fenced());
  CHECK(h.sync.fences_lifted() == 1);
}

TEST_CASE("sync: an allocation carries its pod's spec.priority, not the record's",
          "[k8s][sync][preemption]") {
  Harness h;
  h.sync.replace_nodes({topology_node("n1", 4)});
  Allocation a = whole("u1", "n1", {0, 1});
  a.priority = 700;
  // The record is unchanged by priorities (older extenders read it): priority comes from the pod.
  CHECK(encode_allocation_record(a) == encode_allocation_record(whole("u1", "n1", {0, 1})));
  json pod = bound_pod(a);
  pod["spec"]["priority"] = 700;
  h.sync.apply_pod("ADDED", pod);
  REQUIRE(h.cluster.allocation("u1") != nullptr);
  CHECK(*h.cluster.allocation("u1") == a);

  h.sync.apply_pod("ADDED", bound_pod(whole("u2", "n1", {2})));  // no spec.priority: 0
  REQUIRE(h.cluster.allocation("u2") != nullptr);
  CHECK(h.cluster.allocation("u2")->priority == 0);
}
