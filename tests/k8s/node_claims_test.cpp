// Claims against the fake API server: the ConfigMap's resourceVersion precondition, re-reads on
// 409, and which claims stand in the way (docs/high-availability.md).
#include "gapless/k8s/node_claims.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <deque>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "eventually.h"
#include "fake_api_server.h"
#include "gapless/k8s/allocation_record.h"
#include "gate.h"
#include "k8s_objects.h"

using namespace gapless;
using gapless::k8s::testing::whole;
using nlohmann::json;

namespace {

// The fake ConfigMap's claims, decoded (`objects`: k8s::ClaimOptions::objects).
std::vector<k8s::Claim> stored(const test::FakeApiServer& server, const std::string& node,
                               std::size_t objects = 0) {
  auto cm = server.config_map("gapless-system", k8s::claims_object_name(node, objects));
  if (!cm) return {};
  auto claims = k8s::decode_claims(cm->at("data").at("claims").get<std::string>());
  REQUIRE(claims.ok());
  return *claims;
}

// Whole GPUs only: `ours` fits unless another claim names one of its GPUs.
k8s::ClaimCheck disjoint_from(const model::Allocation& ours) {
  return [ours](const std::vector<model::Allocation>& others) -> Status {
    std::set<int> mine;
    for (const auto& g : ours.gpus) mine.insert(g.index);
    for (const auto& o : others) {
      for (const auto& g : o.gpus) {
        if (mine.count(g.index) != 0) return Error{"GPU " + std::to_string(g.index) + " taken"};
      }
    }
    return Status::Ok();
  };
}

// One object per node unless `objects` says otherwise.
k8s::ClaimOptions options(const std::string& holder, std::int64_t* clock = nullptr,
                          std::size_t objects = 0) {
  k8s::ClaimOptions o;
  o.holder = holder;
  o.objects = objects;
  if (clock != nullptr) o.now_ms = [clock] { return *clock; };
  return o;
}

// Forwards to the fake server; runs `before_put` once, just before the first PUT (another
// writer landing between our read and our write).
class Interleaving final : public k8s::ApiTransport {
 public:
  explicit Interleaving(k8s::ApiTransport& inner) : inner_(inner) {}
  std::function<void()> before_put;
  std::map<std::string, int> calls;  // requests sent, by method
  test::Gate* hold_puts = nullptr;   // when set, every PUT waits there first
  std::deque<test::Gate>* put_gates = nullptr;  // when set, the k-th PUT waits at the k-th gate
  Result<k8s::ApiResponse> call(const std::string& method, const std::string& path,
                                const std::string& body, const std::string& type) override {
    if (method == "PUT" && before_put) std::exchange(before_put, nullptr)();
    if (method == "PUT" && hold_puts != nullptr) hold_puts->pass();
    test::Gate* put_gate = nullptr;
    {
      std::lock_guard lock(mu_);
      if (method == "PUT" && put_gates != nullptr &&
          std::size_t(calls[method]) < put_gates->size()) {
        put_gate = &(*put_gates)[calls[method]];
      }
      ++calls[method];
    }
    if (put_gate != nullptr) put_gate->pass();
    return inner_.call(method, path, body, type);
  }
  Result<int> watch(const std::string& path,
                    const std::function<bool(const json&)>& on_event) override {
    return inner_.watch(path, on_event);
  }

 private:
  k8s::ApiTransport& inner_;
  std::mutex mu_;
};

}  // namespace

TEST_CASE("claims encode and decode; garbage is refused, never read as empty", "[k8s][claims]") {
  const std::vector<k8s::Claim> claims = {{"u1", "ml", "p1", "replica-a", "{\"v\":1}", 1700},
                                          {"u2", "ml", "p2", "replica-b", "{}", 1800}};
  auto back = k8s::decode_claims(k8s::encode_claims(claims));
  REQUIRE(back.ok());
  CHECK(*back == claims);
  CHECK(k8s::decode_claims("[]").ok());
  CHECK_FALSE(k8s::decode_claims("{}").ok());
  CHECK_FALSE(k8s::decode_claims("not json").ok());
  CHECK_FALSE(k8s::decode_claims(R"([{"uid":"u"}])").ok());
  CHECK_FALSE(k8s::decode_claims(R"([{"uid":"u","ns":"a","name":"b","holder":"h","record":"r"}])")
                  .ok());  // no "at"
  CHECK(k8s::claims_object_name("n1") == "gapless-claims-n1");
  CHECK(k8s::claims_object_name(std::string(300, 'x')).size() == 253);
  // Shared objects: the same node always maps to the same one, and nodes spread over them.
  CHECK(k8s::claims_object_name("n1", 1) == "gapless-claimset-0");
  std::set<std::string> used;
  for (int i = 0; i < 64; ++i) {
    const std::string name = k8s::claims_object_name("node-" + std::to_string(i), 4);
    CHECK(name == k8s::claims_object_name("node-" + std::to_string(i), 4));
    used.insert(name);
  }
  CHECK(used == std::set<std::string>{"gapless-claimset-0", "gapless-claimset-1",
                                      "gapless-claimset-2", "gapless-claimset-3"});
}

TEST_CASE(
    "the fake API server's ConfigMaps: create, and update with a resourceVersion "
    "precondition",
    "[k8s][claims]") {
  test::FakeApiServer server;
  k8s::ApiClient api(server.client_config());
  const std::string base = "/api/v1/namespaces/ns/configmaps";
  const json cm = {{"metadata", {{"name", "c"}}}, {"data", {{"k", "1"}}}};
  auto created = api.call("POST", base, cm.dump(), "application/json");
  REQUIRE(created.ok());
  REQUIRE(created->status == 201);
  const std::string rv = json::parse(created->body)["metadata"]["resourceVersion"];
  CHECK(api.call("POST", base, cm.dump(), "application/json")->status == 409);

  json update = cm;
  update["metadata"]["resourceVersion"] = rv;
  update["data"]["k"] = "2";
  auto first = api.call("PUT", base + "/c", update.dump(), "application/json");
  REQUIRE(first->status == 200);
  update["data"]["k"] = "3";  // the same, now stale, resourceVersion
  auto stale = api.call("PUT", base + "/c", update.dump(), "application/json");
  CHECK(stale->status == 409);
  CHECK_THAT(stale->body, Catch::Contains("the object has been modified"));
  CHECK(server.config_map("ns", "c")->at("data").at("k") == "2");
  update["metadata"].erase("resourceVersion");  // no precondition: unconditional
  CHECK(api.call("PUT", base + "/c", update.dump(), "application/json")->status == 200);
  CHECK(api.call("PUT", base + "/missing", json{{"metadata", {{"name", "missing"}}}}.dump(),
                 "application/json")
            ->status == 404);
}

TEST_CASE("a claim is written with the precondition; a claim on the same GPUs is refused",
          "[k8s][claims]") {
  test::FakeApiServer server;
  k8s::ApiClient api(server.client_config());
  k8s::KubeNodeClaims a(api, options("replica-a"));
  k8s::KubeNodeClaims b(api, options("replica-b"));
  const model::Allocation p1 = whole("u1", "n1", {0, 1});
  REQUIRE(a.claim(p1, disjoint_from(p1)).ok());
  REQUIRE(stored(server, "n1").size() == 1);
  CHECK(stored(server, "n1")[0].holder == "replica-a");
  CHECK(stored(server, "n1")[0].record == k8s::encode_allocation_record(p1));

  // The pod of the first claim is pending (its bind in flight): the claim stands.
  server.add_pod(k8s::testing::pod_object("pod-u1", "u1", ""));
  const model::Allocation p2 = whole("u2", "n1", {1, 2});
  Status refused = b.claim(p2, disjoint_from(p2));
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.error(), Catch::Contains("another replica claimed GPUs on node n1 first") &&
                                  Catch::Contains("GPU 1 taken"));
  CHECK(stored(server, "n1").size() == 1);

  const model::Allocation p3 = whole("u3", "n1", {2, 3});
  REQUIRE(b.claim(p3, disjoint_from(p3)).ok());
  CHECK(stored(server, "n1").size() == 2);

  SECTION("release removes only our own claim") {
    b.release(p3);
    REQUIRE(stored(server, "n1").size() == 1);
    CHECK(stored(server, "n1")[0].uid == "u1");
  }
  SECTION("a claim whose pod is gone is dropped when it stands in the way") {
    server.delete_pod("ml", "pod-u1");
    REQUIRE(b.claim(p2, disjoint_from(p2)).ok());
    std::set<std::string> uids;
    for (const auto& c : stored(server, "n1")) uids.insert(c.uid);
    CHECK(uids == std::set<std::string>{"u2", "u3"});
  }
  SECTION("a claim whose pod is bound to another node is dropped when it stands in the way") {
    server.bind_pod("ml", "pod-u1", "n2");
    REQUIRE(b.claim(p2, disjoint_from(p2)).ok());
  }
}

TEST_CASE("a write that loses the race (409) re-reads and judges the winner's claim",
          "[k8s][claims]") {
  test::FakeApiServer server;
  k8s::ApiClient api(server.client_config());
  Interleaving racing(api);
  k8s::KubeNodeClaims a(racing, options("replica-a"));
  k8s::KubeNodeClaims b(api, options("replica-b"));
  // The object exists, so the next write is a PUT with the precondition.
  REQUIRE(a.claim(whole("u0", "n1", {7}), disjoint_from(whole("u0", "n1", {7}))).ok());
  server.add_pod(k8s::testing::pod_object("pod-u2", "u2", ""));

  SECTION("the winner took other GPUs: ours is added beside it") {
    const model::Allocation theirs = whole("u2", "n1", {2});
    racing.before_put = [&] { REQUIRE(b.claim(theirs, disjoint_from(theirs)).ok()); };
    const model::Allocation ours = whole("u1", "n1", {0, 1});
    REQUIRE(a.claim(ours, disjoint_from(ours)).ok());
    CHECK(stored(server, "n1").size() == 3);
  }
  SECTION("the winner took one of our GPUs: ours is refused") {
    const model::Allocation theirs = whole("u2", "n1", {1});
    racing.before_put = [&] { REQUIRE(b.claim(theirs, disjoint_from(theirs)).ok()); };
    const model::Allocation ours = whole("u1", "n1", {0, 1});
    CHECK_FALSE(a.claim(ours, disjoint_from(ours)).ok());
    CHECK(stored(server, "n1").size() == 2);
  }
}

TEST_CASE("expired claims are dropped on the next write; a full object refuses claims",
          "[k8s][claims]") {
  test::FakeApiServer server;
  k8s::ApiClient api(server.client_config());
  std::int64_t clock = 1'000'000;
  k8s::ClaimOptions o = options("replica-a", &clock);
  o.max_claims = 3;
  k8s::KubeNodeClaims a(api, o);
  k8s::KubeNodeClaims b(api, options("replica-b", &clock));
  for (int i = 0; i < 3; ++i) {
    const model::Allocation p = whole("u" + std::to_string(i), "n1", {i});
    server.add_pod(k8s::testing::pod_object(p.pod_name, p.pod_uid, ""));
    REQUIRE(b.claim(p, disjoint_from(p)).ok());
  }
  const model::Allocation ours = whole("u9", "n1", {5});
  Status full = a.claim(ours, disjoint_from(ours));
  REQUIRE_FALSE(full.ok());
  CHECK_THAT(full.error(), Catch::Contains("3 live claims"));

  clock += std::chrono::milliseconds(o.ttl).count();
  REQUIRE(a.claim(ours, disjoint_from(ours)).ok());
  REQUIRE(stored(server, "n1").size() == 1);
  CHECK(stored(server, "n1")[0].uid == "u9");
}

TEST_CASE("an unreadable claim object blocks claims on its node with a clear error",
          "[k8s][claims]") {
  test::FakeApiServer server;
  k8s::ApiClient api(server.client_config());
  const json cm = {{"metadata", {{"name", "gapless-claims-n1"}}}, {"data", {{"claims", "{"}}}};
  REQUIRE(api.call("POST", "/api/v1/namespaces/gapless-system/configmaps", cm.dump(),
                   "application/json")
              ->status == 201);
  k8s::KubeNodeClaims a(api, options("replica-a"));
  const model::Allocation ours = whole("u1", "n1", {0});
  Status s = a.claim(ours, disjoint_from(ours));
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.error(), Catch::Contains("unreadable") && Catch::Contains("delete it"));
}

TEST_CASE("a replica writes over its own last write without reading; a stale memory costs a read",
          "[k8s][claims]") {
  test::FakeApiServer server;
  k8s::ApiClient api(server.client_config());
  Interleaving counted(api);
  k8s::KubeNodeClaims a(counted, options("replica-a"));
  k8s::KubeNodeClaims b(api, options("replica-b"));
  auto claim = [](k8s::KubeNodeClaims& who, const model::Allocation& p) {
    return who.claim(p, disjoint_from(p));
  };
  REQUIRE(claim(a, whole("u1", "n1", {0})).ok());  // read (absent), create
  CHECK(counted.calls == std::map<std::string, int>{{"GET", 1}, {"POST", 1}});
  counted.calls.clear();
  REQUIRE(claim(a, whole("u2", "n1", {1})).ok());
  REQUIRE(claim(a, whole("u3", "n1", {2})).ok());
  CHECK(counted.calls == std::map<std::string, int>{{"PUT", 2}});  // no read
  CHECK(stored(server, "n1").size() == 3);
  counted.calls.clear();

  SECTION("another replica wrote since: the write fails its precondition, then reads and judges") {
    server.add_pod(k8s::testing::pod_object("pod-u8", "u8", ""));
    REQUIRE(claim(b, whole("u8", "n1", {4})).ok());
    Status refused = claim(a, whole("u4", "n1", {4, 5}));
    REQUIRE_FALSE(refused.ok());
    CHECK_THAT(refused.error(), Catch::Contains("GPU 4 taken"));
    // The write (409), the object, then u8's pod (is the claim in the way alive?).
    CHECK(counted.calls == std::map<std::string, int>{{"GET", 2}, {"PUT", 1}});
    REQUIRE(claim(a, whole("u5", "n1", {5})).ok());  // beside b's, over a fresh read
    CHECK(stored(server, "n1").size() == 5);
  }
  SECTION("the object was deleted since (an operator): the write reads again and creates it") {
    REQUIRE(api.call("DELETE", "/api/v1/namespaces/gapless-system/configmaps/gapless-claims-n1", "",
                     "application/json")
                ->ok());
    REQUIRE(claim(a, whole("u4", "n1", {4})).ok());
    CHECK(counted.calls == std::map<std::string, int>{{"GET", 1}, {"POST", 1}, {"PUT", 1}});
    REQUIRE(stored(server, "n1").size() == 1);
    CHECK(stored(server, "n1")[0].uid == "u4");
  }
}

TEST_CASE("claims on one node made while its write is in flight go in the next write, each judged",
          "[k8s][claims]") {
  test::FakeApiServer server;
  k8s::ApiClient api(server.client_config());
  Interleaving counted(api);
  k8s::KubeNodeClaims a(counted, options("replica-a"));
  k8s::KubeNodeClaims b(api, options("replica-b"));
  server.add_pod(k8s::testing::pod_object("pod-u8", "u8", ""));
  const model::Allocation theirs = whole("u8", "n1", {4});
  REQUIRE(b.claim(theirs, disjoint_from(theirs)).ok());  // the object exists: writes are PUTs

  test::Gate gate;
  counted.hold_puts = &gate;
  const std::vector<model::Allocation> ours = {whole("u1", "n1", {0}), whole("u2", "n1", {4}),
                                               whole("u3", "n1", {5})};
  std::vector<Status> outcomes(ours.size(), Status::Ok());
  {
    std::vector<std::jthread> claiming;
    auto start = [&](std::size_t i) {
      claiming.emplace_back([&, i] { outcomes[i] = a.claim(ours[i], disjoint_from(ours[i])); });
    };
    test::OpenOnExit opener{gate};
    start(0);
    REQUIRE(test::eventually([&] { return gate.entered() == 1; }));  // u1's write is in flight
    start(1);
    start(2);
    REQUIRE(test::eventually([&] { return a.waiting_claims("n1") == 2; }));  // u2, u3 wait for it
  }
  CHECK(outcomes[0].ok());
  REQUIRE_FALSE(outcomes[1].ok());  // GPU 4 is b's
  CHECK_THAT(outcomes[1].error(), Catch::Contains("GPU 4 taken"));
  CHECK(outcomes[2].ok());
  CHECK(counted.calls["PUT"] == 2);  // u1's, then u3's (u2's judged out)
  std::set<std::string> uids;
  for (const auto& c : stored(server, "n1")) uids.insert(c.uid);
  CHECK(uids == std::set<std::string>{"u1", "u3", "u8"});
}

TEST_CASE(
    "a node's claims that arrive during each write go in the next one, until none wait; "
    "other nodes' claims never wait for it",
    "[k8s][claims]") {
  test::FakeApiServer server;
  k8s::ApiClient api(server.client_config());
  Interleaving counted(api);
  k8s::KubeNodeClaims a(counted, options("replica-a"));
  const auto u0 = whole("u0", "n1", {0});
  REQUIRE(a.claim(u0, disjoint_from(u0)).ok());  // n1's object exists: its writes are PUTs

  std::deque<test::Gate> gates(2);  // the first two PUTs wait for their gate
  counted.put_gates = &gates;
  const std::vector<model::Allocation> ours = {whole("u1", "n1", {1}), whole("u2", "n1", {2}),
                                               whole("u3", "n1", {3}), whole("u4", "n1", {4}),
                                               whole("u5", "n1", {5}), whole("u9", "n2", {0})};
  std::vector<Status> outcomes(ours.size(), Status::Ok());
  std::atomic<int> done{0};
  {
    std::vector<std::jthread> claiming;
    auto start = [&](std::size_t i) {
      claiming.emplace_back([&, i] {
        outcomes[i] = a.claim(ours[i], disjoint_from(ours[i]));
        ++done;
      });
    };
    test::OpenOnExit open_second{gates[1]};
    test::OpenOnExit open_first{gates[0]};
    start(0);
    REQUIRE(test::eventually([&] { return gates[0].entered() == 1; }));  // u1's write is held
    start(1);
    start(2);
    REQUIRE(test::eventually([&] { return a.waiting_claims("n1") == 2; }));  // u2, u3 wait
    start(5);  // n2's first claim (a create) while n1's write is held
    REQUIRE(test::eventually([&] { return done == 1; }));
    CHECK(outcomes[5].ok());
    gates[0].open();  // u1 done; u2 and u3 go in the second write, held in turn
    REQUIRE(test::eventually([&] { return gates[1].entered() == 1; }));
    REQUIRE(test::eventually([&] { return done == 2 && a.waiting_claims("n1") == 0; }));
    start(3);
    start(4);
    REQUIRE(test::eventually([&] { return a.waiting_claims("n1") == 2; }));  // u4, u5 wait
    gates[1].open();  // u2, u3 done; one of u4 and u5 writes the third for both
    REQUIRE(test::eventually([&] { return done == 6; }));
  }
  for (const Status& s : outcomes) CHECK(s.ok());
  CHECK(counted.calls["PUT"] == 3);
  std::set<std::string> uids;
  for (const auto& c : stored(server, "n1")) uids.insert(c.uid);
  CHECK(uids == std::set<std::string>{"u0", "u1", "u2", "u3", "u4", "u5"});
  REQUIRE(stored(server, "n2").size() == 1);
  CHECK(stored(server, "n2")[0].uid == "u9");
}

TEST_CASE(
    "shared claim objects: claims on different nodes made at once go in one write, each judged "
    "against its own node's claims only",
    "[k8s][claims]") {
  test::FakeApiServer server;
  k8s::ApiClient api(server.client_config());
  Interleaving counted(api);
  k8s::KubeNodeClaims a(counted, options("replica-a", nullptr, 1));
  k8s::KubeNodeClaims b(api, options("replica-b", nullptr, 1));
  server.add_pod(k8s::testing::pod_object("pod-u8", "u8", ""));
  const model::Allocation theirs = whole("u8", "n2", {0});
  REQUIRE(b.claim(theirs, disjoint_from(theirs)).ok());  // the object exists: writes are PUTs

  test::Gate gate;
  counted.hold_puts = &gate;
  // GPU 0 of n1, n2 and n3: only n2's is b's.
  const std::vector<model::Allocation> ours = {whole("u1", "n1", {0}), whole("u2", "n2", {0}),
                                               whole("u3", "n3", {0})};
  std::vector<Status> outcomes(ours.size(), Status::Ok());
  {
    std::vector<std::jthread> claiming;
    auto start = [&](std::size_t i) {
      claiming.emplace_back([&, i] { outcomes[i] = a.claim(ours[i], disjoint_from(ours[i])); });
    };
    test::OpenOnExit opener{gate};
    start(0);
    REQUIRE(test::eventually([&] { return gate.entered() == 1; }));  // u1's write is in flight
    start(1);
    start(2);
    REQUIRE(test::eventually(
        [&] { return a.waiting_claims("n2") == 1 && a.waiting_claims("n3") == 1; }));
  }
  CHECK(outcomes[0].ok());  // b's GPU 0 is on another node
  REQUIRE_FALSE(outcomes[1].ok());
  CHECK_THAT(outcomes[1].error(), Catch::Contains("GPU 0 taken"));
  CHECK(outcomes[2].ok());
  CHECK(counted.calls["PUT"] == 2);  // u1's, then u3's for n3 (u2's judged out)
  // The first write read b's object, and u2's refusal read pod u8 back (is it alive?); the
  // second write went over the first without a read.
  CHECK(counted.calls["GET"] == 2);
  std::set<std::string> uids;
  for (const auto& c : stored(server, "n1", 1)) uids.insert(c.uid);
  CHECK(uids == std::set<std::string>{"u1", "u3", "u8"});
}

TEST_CASE(
    "settled claims are dropped with the resourceVersion they are settled through; a replica "
    "whose informer is behind it does not judge the object until it catches up",
    "[k8s][claims]") {
  test::FakeApiServer server;
  k8s::ApiClient api(server.client_config());
  std::mutex mu;
  std::map<std::string, std::uint64_t> settled;  // a's informer: pod UID -> where it was seen
  std::atomic<std::uint64_t> b_seen{0};          // b's informer
  k8s::ClaimOptions ao = options("replica-a", nullptr, 1), bo = options("replica-b", nullptr, 1);
  bo.informer_wait = std::chrono::milliseconds(50);
  k8s::KubeNodeClaims a(api, ao), b(api, bo);
  a.set_settlement({[&](const model::Allocation& c) -> std::optional<std::uint64_t> {
                      std::lock_guard lock(mu);
                      auto it = settled.find(c.pod_uid);
                      if (it == settled.end()) return std::nullopt;
                      return it->second;
                    },
                    [] { return std::uint64_t{1000}; }});
  b.set_settlement({[](const model::Allocation&) { return std::optional<std::uint64_t>(); },
                    [&] { return b_seen.load(); }});
  const auto p = whole("up", "n1", {0});
  REQUIRE(a.claim(p, disjoint_from(p)).ok());
  {
    std::lock_guard lock(mu);
    settled["up"] = 700;  // a's watch delivered pod up bound at resourceVersion 700
  }
  const auto p2 = whole("up2", "n1", {1});
  REQUIRE(a.claim(p2, disjoint_from(p2)).ok());  // this write drops up's claim
  auto cm = server.config_map("gapless-system", "gapless-claimset-0");
  REQUIRE(cm);
  CHECK(cm->at("data").at("settledThrough") == "700");
  REQUIRE(stored(server, "n1", 1).size() == 1);
  CHECK(stored(server, "n1", 1)[0].uid == "up2");

  // b's model lacks up until its informer reaches 700: up's GPU 0 is not free for it to judge.
  const auto q = whole("uq", "n1", {0});
  b_seen = 699;
  Status behind = b.claim(q, disjoint_from(q));
  REQUIRE_FALSE(behind.ok());
  CHECK_THAT(behind.error(), Catch::Contains("pod informer is behind the claims") &&
                                 Catch::Contains("settled through 700"));
  CHECK(stored(server, "n1", 1).size() == 1);  // nothing written
  b_seen = 700;  // now b's model counts up (here: the check sees only up2, on GPU 1)
  CHECK(b.claim(q, disjoint_from(q)).ok());
  // A settled resourceVersion never goes back.
  CHECK(
      server.config_map("gapless-system", "gapless-claimset-0")->at("data").at("settledThrough") ==
      "700");
}

TEST_CASE("a claim object whose settled resourceVersion is garbage blocks claims, never ignored",
          "[k8s][claims]") {
  test::FakeApiServer server;
  k8s::ApiClient api(server.client_config());
  const json cm = {{"metadata", {{"name", "gapless-claimset-0"}}},
                   {"data", {{"claims", "[]"}, {"settledThrough", "soon"}}}};
  REQUIRE(api.call("POST", "/api/v1/namespaces/gapless-system/configmaps", cm.dump(),
                   "application/json")
              ->status == 201);
  k8s::KubeNodeClaims a(api, options("replica-a", nullptr, 1));
  const auto p = whole("up", "n1", {0});
  Status s = a.claim(p, disjoint_from(p));
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.error(), Catch::Contains("unreadable") && Catch::Contains("delete it"));
}
