// The extender verbs over HTTP with kube-scheduler's own request bodies (tests/fixtures/extender,
// docs/extender-protocol.md §8): exact response shapes, case-insensitive keys, null everywhere.
#include <algorithm>
#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <vector>

#include "test_server.h"

namespace gapless::test {
namespace {

constexpr const char* kFixturePodUid = "5d0c6f5e-3b0e-4c61-9f7e-2a8f3c1b7d42";

// The three Node objects of filter-args-full.json, plus gpu-h100-02 made like gpu-h100-01.
json fixture_nodes() {
  json items = fixture("filter-args-full.json").at("Nodes").at("items");
  json h100 = items.at(0);
  REQUIRE(h100.at("metadata").at("name") == "gpu-h100-01");
  h100["metadata"]["name"] = "gpu-h100-02";
  h100["metadata"]["uid"] = "e2a1f0c4-6b0d-4b53-9d1e-3c2b1a0f9e82";
  h100["metadata"]["labels"]["kubernetes.io/hostname"] = "gpu-h100-02";
  items.push_back(h100);
  return items;
}

// The fixture with the pod's nvidia.com/gpu request and limit changed.
json with_gpu_count(json args, int gpus) {
  json& res = args.at("Pod").at("spec").at("containers").at(0).at("resources");
  res["limits"]["nvidia.com/gpu"] = std::to_string(gpus);
  res["requests"]["nvidia.com/gpu"] = std::to_string(gpus);
  return args;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// Full mode: the items of the answer are unmodified input items, in input order.
std::vector<std::string> check_full_mode(const json& in_items, const json& r) {
  INFO(r.dump());
  CHECK(r.at("NodeNames").is_null());
  REQUIRE(r.at("Nodes").is_object());
  REQUIRE(keys_of(r.at("Nodes")) == std::set<std::string>{"metadata", "items"});
  CHECK(r.at("Nodes").at("metadata") == json::object());
  std::vector<std::string> passed;
  std::size_t next = 0;
  for (const json& item : r.at("Nodes").at("items")) {
    const std::string name = item.at("metadata").at("name");
    while (next < in_items.size() && in_items[next].at("metadata").at("name") != name) ++next;
    INFO("item " << name << " is not an input item, or out of order");
    REQUIRE(next < in_items.size());
    CHECK(item == in_items[next]);
    passed.push_back(name);
    ++next;
  }
  return passed;
}

std::vector<std::string> input_names(const json& args) {
  std::vector<std::string> out;
  for (const json& item : args.at("Nodes").at("items"))
    out.push_back(item.at("metadata").at("name"));
  return out;
}

}  // namespace

TEST_CASE("filter fixture in nodeCache mode: NodeNames subset, Nodes null", "[server][wire]") {
  TestServer srv(cluster_of(fixture_nodes()));
  const std::string before = srv.state();
  const json args = fixture("filter-args-nodecache.json");
  const auto input = args.at("NodeNames").get<std::vector<std::string>>();

  httplib::Response raw = srv.post("/filter", extender_fixture_text("filter-args-nodecache.json"));
  REQUIRE(raw.status == 200);
  // JSON; the charset parameter keeps httplib from gzipping it for kube-scheduler (below).
  CHECK(raw.get_header_value("Content-Type") == "application/json; charset=utf-8");
  CHECK(raw.body.find("\"Nodes\":null") != std::string::npos);
  const json r = json::parse(raw.body);
  REQUIRE(r.at("NodeNames").is_array());
  const auto passed = r.at("NodeNames").get<std::vector<std::string>>();
  for (const std::string& n : passed) CHECK(contains(input, n));
  check_filter_result(r, input, passed);
  CHECK(contains(passed, "gpu-h100-01"));
  CHECK(contains(passed, "gpu-h100-02"));

  // 8 GPUs: the 4-GPU MIG node can never host it.
  const json big = srv.call("/filter", with_gpu_count(args, 8).dump());
  const auto big_passed = big.at("NodeNames").get<std::vector<std::string>>();
  check_filter_result(big, input, big_passed);
  CHECK_FALSE(contains(big_passed, "gpu-a100-mig-03"));
  CHECK(contains(big_passed, "gpu-h100-01"));
  // 16 GPUs: no node. Then, and only then, every node is listed with its reason.
  const json huge = srv.call("/filter", with_gpu_count(args, 16).dump());
  REQUIRE(huge.at("NodeNames").empty());
  check_filter_result(huge, input, {});
  CHECK(huge.at("FailedAndUnresolvableNodes").contains("gpu-a100-mig-03"));

  CHECK(srv.state() == before);  // filter commits nothing
}

// kube-scheduler's Go client asks for gzip on every call; over loopback compressing is pure cost.
TEST_CASE("verb answers are not compressed, even when the client accepts gzip", "[server][wire]") {
  TestServer srv(cluster_of(fixture_nodes()));
  httplib::Headers gzip = {{"Accept-Encoding", "gzip, deflate, br"}};
  for (const char* verb : {"/filter", "/prioritize"}) {
    const std::string fixture_name =
        std::string(verb) == "/filter" ? "filter-args-nodecache.json" : "prioritize-args.json";
    auto res =
        srv.client().Post(verb, gzip, extender_fixture_text(fixture_name), "application/json");
    REQUIRE(res);
    CHECK(res->status == 200);
    CHECK(res->get_header_value("Content-Encoding").empty());
    CHECK_NOTHROW(json::parse(res->body));
  }
}

TEST_CASE("filter fixture in full mode: unmodified input items, NodeNames null", "[server][wire]") {
  TestServer srv(cluster_of(fixture_nodes()));
  const json args = fixture("filter-args-full.json");
  const auto input = input_names(args);

  httplib::Response raw = srv.post("/filter", extender_fixture_text("filter-args-full.json"));
  REQUIRE(raw.status == 200);
  CHECK(raw.body.find("\"NodeNames\":null") != std::string::npos);
  const json r = json::parse(raw.body);
  const auto passed = check_full_mode(args.at("Nodes").at("items"), r);
  check_filter_result(r, input, passed);
  CHECK(contains(passed, "gpu-h100-01"));

  const json big_args = with_gpu_count(args, 8);
  const json big = srv.call("/filter", big_args.dump());
  const auto big_passed = check_full_mode(big_args.at("Nodes").at("items"), big);
  check_filter_result(big, input, big_passed);
  CHECK(big_passed.size() < input.size());
  const json huge = srv.call("/filter", with_gpu_count(args, 16).dump());
  REQUIRE(huge.at("Nodes").at("items").empty());
  check_filter_result(huge, input, {});
  CHECK(huge.at("FailedAndUnresolvableNodes").contains("gpu-a100-mig-03"));
}

TEST_CASE("prioritize fixture: a bare array, one Host/Score per input node", "[server][wire]") {
  TestServer srv(cluster_of(fixture_nodes()));
  const json args = fixture("prioritize-args.json");
  const json r = srv.call("/prioritize", extender_fixture_text("prioritize-args.json"));
  INFO(r.dump());
  REQUIRE(r.is_array());
  std::multiset<std::string> hosts;
  for (const json& e : r) {
    REQUIRE(keys_of(e) == std::set<std::string>{"Host", "Score"});
    REQUIRE(e.at("Score").is_number_integer());
    CHECK(e.at("Score").get<int>() >= 0);
    CHECK(e.at("Score").get<int>() <= 10);
    hosts.insert(e.at("Host").get<std::string>());
  }
  const auto input = args.at("NodeNames").get<std::vector<std::string>>();
  CHECK(hosts == std::multiset<std::string>(input.begin(), input.end()));

  // A node the pod cannot use scores 0.
  json all = with_gpu_count(args, 8);
  all["NodeNames"] = json::array({"gpu-h100-01", "gpu-a100-mig-03"});
  const json r2 = srv.call("/prioritize", all.dump());
  REQUIRE(r2.size() == 2);
  for (const json& e : r2) {
    if (e.at("Host") == "gpu-a100-mig-03") CHECK(e.at("Score") == 0);
  }
}

TEST_CASE("bind fixture after filter: {\"Error\":\"\"}, recorded once", "[server][wire]") {
  TestServer srv(cluster_of(fixture_nodes()));
  srv.call("/filter", extender_fixture_text("filter-args-nodecache.json"));
  httplib::Response raw = srv.post("/bind", extender_fixture_text("bind-args.json"));
  REQUIRE(raw.status == 200);
  CHECK(raw.body == R"({"Error":""})");

  const json state = json::parse(srv.state());
  REQUIRE(state.at("allocations").size() == 1);
  const json& a = state.at("allocations").at(0);
  CHECK(a.at("uid") == kFixturePodUid);
  CHECK(a.at("pod") == "ml-team/llm-train-0");
  CHECK(a.at("record").at("node") == "gpu-h100-01");
  CHECK(a.at("record").at("gpus").size() == 2);

  const auto bindings = srv.binder().bindings();
  REQUIRE(bindings.size() == 1);
  CHECK(bindings[0].node == "gpu-h100-01");
  CHECK(bindings[0].uid == kFixturePodUid);
  CHECK(bindings[0].annotations.count("gapless.io/allocation") == 1);

  // The reply got lost and kube-scheduler asks again: same answer, nothing bound twice.
  CHECK(srv.post("/bind", extender_fixture_text("bind-args.json")).body == R"({"Error":""})");
  CHECK(srv.binder().bindings().size() == 1);
  CHECK(json::parse(srv.state()).at("allocations").size() == 1);
}

TEST_CASE("preempt fixture: NodeNameToMetaVictims, every kept node with victims",
          "[server][wire]") {
  TestServer srv(cluster_of(fixture_nodes()));
  const json args = fixture("preempt-args.json");
  const json& offered = args.at("NodeNameToMetaVictims");
  const json r = srv.call("/preempt", extender_fixture_text("preempt-args.json"));
  INFO(r.dump());
  REQUIRE(keys_of(r) == std::set<std::string>{"NodeNameToMetaVictims"});
  const json& kept = r.at("NodeNameToMetaVictims");
  REQUIRE(kept.is_object());
  CHECK(kept.size() == offered.size());  // both nodes are free enough for 2 GPUs
  for (auto it = kept.begin(); it != kept.end(); ++it) {
    REQUIRE(offered.contains(it.key()));
    REQUIRE(keys_of(it.value()) == std::set<std::string>{"Pods", "NumPDBViolations"});
    CHECK(it.value().at("NumPDBViolations") == offered.at(it.key()).at("NumPDBViolations"));
    const json& pods = it.value().at("Pods");
    REQUIRE(pods.is_array());
    REQUIRE_FALSE(pods.empty());
    for (const json& p : pods) {
      REQUIRE(keys_of(p) == std::set<std::string>{"UID"});
      const json& in = offered.at(it.key()).at("Pods");
      CHECK(std::find(in.begin(), in.end(), p) != in.end());
    }
  }
}

TEST_CASE("preempt keeps a node only if its victims free enough GPUs", "[server][wire]") {
  TestServer srv(cluster_of(fixture_nodes()));
  REQUIRE(srv.filter_and_bind(gpu_pod("hog", "uid-hog", 8), "gpu-h100-02") == "");
  json preemptor = gpu_pod("big", "uid-big", 2);
  preemptor["spec"]["priority"] = 1;  // above the hog's 0: only lower priorities are victims
  auto victims = [](const char* uid) {
    return json{{"Pods", json::array({json{{"UID", uid}}})}, {"NumPDBViolations", 0}};
  };
  json args = {{"Pod", preemptor},
               {"NodeNameToVictims", nullptr},
               {"NodeNameToMetaVictims",
                {{"gpu-h100-02", victims("uid-hog")}, {"gpu-h100-01", {{"Pods", json::array()}}}}}};
  json r = srv.call("/preempt", args.dump());
  INFO(r.dump());
  CHECK(r.at("NodeNameToMetaVictims").contains("gpu-h100-02"));
  CHECK_FALSE(r.at("NodeNameToMetaVictims").contains("gpu-h100-01"));  // no victims

  // Evicting a pod the model does not hold there frees no GPU: Gapless adds the pod that does
  // (counted as a possible PDB violation) and keeps kube-scheduler's, evicted for its reasons.
  args["NodeNameToMetaVictims"] = {{"gpu-h100-02", victims("uid-elsewhere")}};
  r = srv.call("/preempt", args.dump());
  CHECK(r.at("NodeNameToMetaVictims") ==
        json{{"gpu-h100-02",
              {{"Pods", json::array({json{{"UID", "uid-elsewhere"}}, json{{"UID", "uid-hog"}}})},
               {"NumPDBViolations", 1}}}});
  preemptor["spec"]["priority"] = 0;  // the hog's own: it may not go, and nothing else helps
  args["Pod"] = preemptor;
  r = srv.call("/preempt", args.dump());
  CHECK(r.at("NodeNameToMetaVictims") == json::object());
  preemptor["spec"]["priority"] = 1;
  args["Pod"] = preemptor;

  // Full-mode victims (whole pods) come back as MetaVictims.
  args["NodeNameToMetaVictims"] = nullptr;
  args["NodeNameToVictims"] = {
      {"gpu-h100-02",
       {{"Pods", json::array({gpu_pod("hog", "uid-hog", 8)})}, {"NumPDBViolations", 1}}}};
  r = srv.call("/preempt", args.dump());
  CHECK(r.at("NodeNameToMetaVictims") ==
        json{{"gpu-h100-02",
              {{"Pods", json::array({json{{"UID", "uid-hog"}}})}, {"NumPDBViolations", 1}}}});
}

TEST_CASE("request keys match case-insensitively", "[server][wire]") {
  TestServer srv(cluster_of(fixture_nodes()));
  const json pod_json = fixture("filter-args-nodecache.json").at("Pod");

  const json r =
      srv.call("/filter", json{{"pod", pod_json},
                               {"nodes", nullptr},
                               {"nodenames", json::array({"gpu-h100-01", "gpu-h100-02"})}}
                              .dump());
  CHECK(r.at("Error") == "");
  CHECK(r.at("NodeNames") == json::array({"gpu-h100-01", "gpu-h100-02"}));

  json full = fixture("filter-args-full.json");
  json lower = {{"POD", full.at("Pod")}, {"nodes", {{"ITEMS", full.at("Nodes").at("items")}}}};
  const json rf = srv.call("/filter", lower.dump());
  CHECK(rf.at("Error") == "");
  check_full_mode(full.at("Nodes").at("items"), rf);

  const json rp = srv.call(
      "/prioritize", json{{"pod", pod_json}, {"NODENAMES", json::array({"gpu-h100-01"})}}.dump());
  REQUIRE(rp.size() == 1);
  CHECK(rp.at(0).at("Host") == "gpu-h100-01");

  const json rb = srv.call("/bind", json{{"podname", "llm-train-0"},
                                         {"podnamespace", "ml-team"},
                                         {"poduid", kFixturePodUid},
                                         {"node", "gpu-h100-01"}}
                                        .dump());
  CHECK(rb.at("Error") == "");

  const json re =
      srv.call("/preempt",
               json{{"pod", pod_json},
                    {"nodenametometavictims",
                     {{"gpu-h100-02",
                       {{"pods", json::array({json{{"uid", "v-1"}}})}, {"numpdbviolations", 2}}}}}}
                   .dump());
  CHECK(re == json{{"NodeNameToMetaVictims",
                    {{"gpu-h100-02",
                      {{"Pods", json::array({json{{"UID", "v-1"}}})}, {"NumPDBViolations", 2}}}}}});
}

TEST_CASE("null is accepted for every field", "[server][wire]") {
  TestServer srv(cluster_of(fixture_nodes()));
  const std::string before = srv.state();
  const json bare_pod = {
      {"metadata",
       {{"name", "cpu-only"},
        {"namespace", nullptr},
        {"uid", "uid-cpu"},
        {"labels", nullptr},
        {"annotations", nullptr},
        {"creationTimestamp", nullptr}}},
      {"spec",
       {{"containers",
         json::array(
             {json{{"name", "c"}, {"resources", {{"limits", nullptr}, {"requests", nullptr}}}}})},
        {"initContainers", nullptr},
        {"nodeName", nullptr},
        {"priorityClassName", nullptr}}},
      {"status", nullptr}};

  json r = srv.call("/filter",
                    json{{"Pod", bare_pod}, {"Nodes", nullptr}, {"NodeNames", nullptr}}.dump());
  check_filter_result(r, {}, {});
  CHECK(r.at("NodeNames") == json::array());
  CHECK(r.at("Nodes").is_null());

  r = srv.call(
      "/filter",
      json{{"Pod", bare_pod}, {"Nodes", nullptr}, {"NodeNames", json::array({"gpu-h100-01"})}}
          .dump());
  check_filter_result(r, {"gpu-h100-01"}, {"gpu-h100-01"});  // no GPU asked: passes

  r = srv.call("/filter", json{{"Pod", bare_pod},
                               {"Nodes", {{"metadata", nullptr}, {"items", nullptr}}},
                               {"NodeNames", nullptr}}
                              .dump());
  CHECK(r.at("Error") == "");
  CHECK(r.at("Nodes") == json{{"metadata", json::object()}, {"items", json::array()}});

  CHECK(srv.call("/prioritize",
                 json{{"Pod", bare_pod}, {"Nodes", nullptr}, {"NodeNames", nullptr}}.dump()) ==
        json::array());
  CHECK(srv.call("/preempt", json{{"Pod", bare_pod},
                                  {"NodeNameToVictims", nullptr},
                                  {"NodeNameToMetaVictims", nullptr}}
                                 .dump()) == json{{"NodeNameToMetaVictims", json::object()}});

  // Null where a value is required: an answer with Error, not a crash.
  r = srv.call("/filter",
               json{{"Pod", nullptr}, {"Nodes", nullptr}, {"NodeNames", nullptr}}.dump());
  CHECK(r.at("Error").get<std::string>().find("Pod") != std::string::npos);
  r = srv.call(
      "/bind",
      json{{"PodName", nullptr}, {"PodNamespace", nullptr}, {"PodUID", nullptr}, {"Node", nullptr}}
          .dump());
  CHECK(r.at("Error").get<std::string>().find("PodName") != std::string::npos);
  CHECK(srv.state() == before);
}

}  // namespace gapless::test
