#include "gapless/k8s/informer.h"

#include <catch2/catch.hpp>

#include <map>
#include <thread>

#include "scripted_transport.h"

using gapless::k8s::Informer;
using gapless::k8s::InformerHandlers;
using gapless::k8s::InformerOptions;
using gapless::k8s::testing::event;
using gapless::k8s::testing::eventually;
using gapless::k8s::testing::list_page;
using gapless::k8s::testing::ScriptedTransport;
using gapless::k8s::testing::stream;
using gapless::k8s::testing::WatchScript;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

json obj(const std::string& name, const std::string& rv, const std::string& label = "") {
  json o = {{"kind", "Pod"}, {"metadata", {{"name", name}, {"resourceVersion", rv}}}};
  if (!label.empty()) o["metadata"]["labels"] = {{"l", label}};
  return o;
}

// What a consumer of the informer would know: name -> object.
class Store {
 public:
  InformerHandlers handlers() {
    InformerHandlers h;
    h.on_list = [this](const std::vector<json>& items) {
      std::lock_guard lock(mu_);
      ++lists_;
      objects_.clear();
      for (const json& o : items) objects_[o["metadata"]["name"]] = o;
    };
    h.on_event = [this](const std::string& type, const json& o) {
      std::lock_guard lock(mu_);
      ++events_;
      if (type == "DELETED") {
        objects_.erase(o["metadata"]["name"]);
      } else {
        objects_[o["metadata"]["name"]] = o;
      }
    };
    h.on_error = [this](const std::string& m) {
      std::lock_guard lock(mu_);
      errors_.push_back(m);
    };
    return h;
  }
  std::map<std::string, json> objects() const {
    std::lock_guard lock(mu_);
    return objects_;
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& [name, o] : objects()) out.push_back(name);
    return out;
  }
  int lists() const {
    std::lock_guard lock(mu_);
    return lists_;
  }
  int events() const {
    std::lock_guard lock(mu_);
    return events_;
  }
  std::vector<std::string> errors() const {
    std::lock_guard lock(mu_);
    return errors_;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, json> objects_;
  int lists_ = 0;
  int events_ = 0;
  std::vector<std::string> errors_;
};

InformerOptions options(const std::string& path = "/api/v1/nodes") {
  InformerOptions o;
  o.path = path;
  o.backoff_initial = 10ms;
  o.backoff_max = 100ms;
  return o;
}

// Runs an informer on its own thread; stops and joins it when the test ends.
struct Running {
  Running(ScriptedTransport& t, InformerOptions o, InformerHandlers h)
      : api(t), informer(t, std::move(o), std::move(h)), thread([this] { informer.run(); }) {}
  ~Running() {
    informer.stop();
    api.close();
    thread.join();
  }
  // Waits until `n` watch requests were made; returns the path of the n-th.
  std::string watch_path(std::size_t n) {
    REQUIRE(eventually([&] { return api.requests_of("watch").size() >= n; }));
    return api.requests_of("watch")[n - 1].path;
  }
  ScriptedTransport& api;
  Informer informer;
  std::thread thread;
};

std::string watch_url(const std::string& rv) {
  return "/api/v1/nodes?watch=1&resourceVersion=" + rv +
         "&allowWatchBookmarks=true&timeoutSeconds=300";
}

}  // namespace

TEST_CASE("informer: initial sync from a chunked list", "[k8s][informer]") {
  ScriptedTransport api;
  api.push_call(list_page("10", {obj("a", "3"), obj("b", "4")}, "tok/+="));
  api.push_call(list_page("10", {obj("c", "5")}));
  Store store;
  InformerOptions o = options("/api/v1/pods");
  o.page_size = 2;
  o.field_selector = "status.phase!=Succeeded,status.phase!=Failed";
  Running run(api, o, store.handlers());

  REQUIRE(eventually([&] { return run.informer.synced(); }));
  CHECK(store.names() == std::vector<std::string>{"a", "b", "c"});
  CHECK(store.lists() == 1);
  const std::string selector =
      "fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed";
  auto calls = api.requests_of("call");
  REQUIRE(calls.size() == 2);
  CHECK(calls[0].path == "/api/v1/pods?limit=2&" + selector);
  CHECK(calls[1].path == "/api/v1/pods?limit=2&" + selector + "&continue=tok%2F%2B%3D");
  CHECK(run.watch_path(1) ==
        "/api/v1/pods?watch=1&resourceVersion=10&allowWatchBookmarks=true"
        "&timeoutSeconds=300&" +
            selector);
  CHECK(run.informer.resource_version() == "10");
}

TEST_CASE("informer: events move state; a normal end re-watches from the last RV",
          "[k8s][informer]") {
  ScriptedTransport api;
  api.push_call(list_page("1", {obj("a", "1"), obj("b", "1")}));
  api.push_watch(stream({event("ADDED", obj("c", "2")), event("MODIFIED", obj("a", "3", "x")),
                         event("DELETED", obj("b", "4"))}));
  Store store;
  Running run(api, options(), store.handlers());

  CHECK(run.watch_path(1) == watch_url("1"));
  CHECK(run.watch_path(2) == watch_url("4"));
  CHECK(store.names() == std::vector<std::string>{"a", "c"});
  CHECK(store.objects()["a"]["metadata"]["labels"]["l"] == "x");
  CHECK(store.events() == 3);
  CHECK(store.lists() == 1);
  CHECK(api.requests_of("call").size() == 1);  // no relist
  CHECK(store.errors().empty());
}

TEST_CASE("informer: a bookmark only advances the resourceVersion", "[k8s][informer]") {
  ScriptedTransport api;
  api.push_call(list_page("1", {obj("a", "1")}));
  api.push_watch(
      stream({event("BOOKMARK", {{"kind", "Node"}, {"metadata", {{"resourceVersion", "7"}}}})}));
  Store store;
  Running run(api, options(), store.handlers());

  CHECK(run.watch_path(2) == watch_url("7"));
  CHECK(run.informer.resource_version() == "7");
  CHECK(store.events() == 0);
  CHECK(store.names() == std::vector<std::string>{"a"});
}

TEST_CASE("informer: 410 Gone relists, and a deletion during the gap is seen", "[k8s][informer]") {
  ScriptedTransport api;
  api.push_call(list_page("1", {obj("a", "1"), obj("b", "1")}));
  const json gone = {{"kind", "Status"},    {"apiVersion", "v1"},
                     {"status", "Failure"}, {"message", "too old resource version: 1 (30)"},
                     {"reason", "Expired"}, {"code", 410}};
  SECTION("as an ERROR event in the stream") {
    api.push_watch(stream({event("MODIFIED", obj("a", "2", "x")), event("ERROR", gone)}));
  }
  SECTION("as the HTTP status of the watch") {
    WatchScript w;
    w.status = 410;
    api.push_watch(w);
  }
  // b was deleted while we could not watch; the relist does not hold it.
  api.push_call(list_page("30", {obj("a", "25", "y")}));
  Store store;
  Running run(api, options(), store.handlers());

  CHECK(run.watch_path(2) == watch_url("30"));
  CHECK(store.lists() == 2);
  CHECK(store.names() == std::vector<std::string>{"a"});
  CHECK(store.objects()["a"]["metadata"]["labels"]["l"] == "y");
  auto calls = api.requests_of("call");
  REQUIRE(calls.size() == 2);
  CHECK(calls[1].path == "/api/v1/nodes?limit=500");
  CHECK(store.errors().empty());
}

TEST_CASE("informer: an expired continue token restarts the list", "[k8s][informer]") {
  ScriptedTransport api;
  api.push_call(list_page("5", {obj("a", "1")}, "t1"));
  api.push_call(410, R"({"kind":"Status","code":410,"reason":"Expired"})");
  api.push_call(list_page("9", {obj("a", "1")}, "t2"));
  api.push_call(list_page("9", {obj("b", "8")}));
  Store store;
  InformerOptions o = options();
  o.page_size = 1;
  Running run(api, o, store.handlers());

  CHECK(run.watch_path(1) == watch_url("9"));
  CHECK(store.lists() == 1);
  CHECK(store.names() == std::vector<std::string>{"a", "b"});
  auto calls = api.requests_of("call");
  REQUIRE(calls.size() == 4);
  CHECK(calls[2].path == "/api/v1/nodes?limit=1");
  CHECK(calls[3].path == "/api/v1/nodes?limit=1&continue=t2");
}

TEST_CASE("informer: failures back off, then recover", "[k8s][informer]") {
  ScriptedTransport api;
  api.push_call_error("connection refused");
  api.push_call(500, R"({"kind":"Status","message":"etcd timeout","code":500})");
  api.push_call(list_page("3", {obj("a", "1")}));
  WatchScript broken;
  broken.transport_error = "connection reset";
  api.push_watch(broken);
  api.push_watch(
      stream({event("ERROR", {{"kind", "Status"}, {"message", "internal"}, {"code", 500}})}));
  WatchScript unavailable;
  unavailable.status = 503;
  api.push_watch(unavailable);
  api.push_watch(stream({event("ADDED", obj("b", "4"))}));
  Store store;
  InformerOptions o = options();
  o.backoff_initial = 40ms;
  o.backoff_max = 1000ms;
  const auto start = std::chrono::steady_clock::now();
  Running run(api, o, store.handlers());

  REQUIRE(eventually([&] { return run.informer.synced(); }));
  CHECK(std::chrono::steady_clock::now() - start >= 40ms + 80ms);
  // Watch failures resume from the list's RV: no relist.
  CHECK(run.watch_path(2) == watch_url("3"));
  CHECK(run.watch_path(4) == watch_url("3"));
  CHECK(run.watch_path(5) == watch_url("4"));
  CHECK(store.names() == std::vector<std::string>{"a", "b"});
  CHECK(api.requests_of("call").size() == 3);
  auto errors = store.errors();
  REQUIRE(errors.size() == 5);
  CHECK(errors[0].find("connection refused") != std::string::npos);
  CHECK(errors[1].find("500") != std::string::npos);
  CHECK(errors[2].find("connection reset") != std::string::npos);
  CHECK(errors[3].find("internal") != std::string::npos);
  CHECK(errors[4].find("503") != std::string::npos);
}

TEST_CASE("informer: stop() ends run() promptly", "[k8s][informer]") {
  ScriptedTransport api;
  Store store;
  InformerOptions o = options();
  SECTION("while backing off") {
    api.push_call_error("connection refused");
    o.backoff_initial = 60s;
    o.backoff_max = 60s;
  }
  SECTION("while a watch streams") {
    api.push_call(list_page("1", {}));
    WatchScript endless;
    endless.endless = true;
    api.push_watch(endless);
  }
  Informer informer(api, o, store.handlers());
  std::thread thread([&] { informer.run(); });
  REQUIRE(
      eventually([&] { return !store.errors().empty() || informer.resource_version() == "tick"; }));
  const auto start = std::chrono::steady_clock::now();
  informer.stop();  // no api.close(): the informer must notice on its own
  thread.join();
  CHECK(std::chrono::steady_clock::now() - start < 1s);
}
