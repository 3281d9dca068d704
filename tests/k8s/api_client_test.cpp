// ApiClient over plain HTTP against the fake API server: lists, watches, tokens, timeouts.
// TLS is in api_client_tls_test.cpp.
#include "gapless/k8s/api_client.h"

#include <httplib.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "fake_api_server.h"
#include "temp_dir.h"

using gapless::Result;
using gapless::k8s::api_error;
using gapless::k8s::ApiClient;
using gapless::k8s::ApiResponse;
using gapless::k8s::ClientConfig;
using gapless::test::FakeApiServer;
using gapless::test::TempDir;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

json node(const std::string& name) {
  return {{"metadata", {{"name", name}, {"labels", {{"nvidia.com/gpu.product", "Tesla-T4"}}}}},
          {"status", {{"allocatable", {{"nvidia.com/gpu", "4"}}}}}};
}

json pod(const std::string& ns, const std::string& name, const std::string& phase = "Pending") {
  return {{"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec", {{"containers", json::array({{{"name", "c"}}})}}},
          {"status", {{"phase", phase}}}};
}

json body_of(const Result<ApiResponse>& r) {
  REQUIRE(r.ok());
  return json::parse(r->body);
}

// A watch running on its own thread, collecting events. Ends the server's watches when it goes
// out of scope unfinished (a failed REQUIRE), so the test does not hang.
class WatchRun {
 public:
  WatchRun(ApiClient& client, FakeApiServer& server, std::string path, std::size_t stop_after = 0)
      : server_(server) {
    result_ = std::async(std::launch::async, [this, &client, path, stop_after] {
      return client.watch(path, [this, stop_after](const json& e) {
        std::lock_guard lock(mu_);
        events_.push_back(e);
        return stop_after == 0 || events_.size() < stop_after;
      });
    });
  }

  std::vector<json> events() {
    std::lock_guard lock(mu_);
    return events_;
  }
  std::vector<std::string> types() {
    std::vector<std::string> out;
    for (const json& e : events()) out.push_back(e["type"]);
    return out;
  }
  bool wait_events(std::size_t n, std::chrono::milliseconds timeout = 5s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (events().size() < n) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(2ms);
    }
    return true;
  }
  Result<int> finish(std::chrono::milliseconds timeout = 5s) {
    REQUIRE(result_.wait_for(timeout) == std::future_status::ready);
    return result_.get();
  }
  ~WatchRun() {
    if (result_.valid()) server_.close_watches(/*abrupt=*/true);
  }

 private:
  FakeApiServer& server_;
  std::mutex mu_;
  std::vector<json> events_;
  std::future<Result<int>> result_;
};

std::string rv_of(const json& obj) {
  return obj["metadata"]["resourceVersion"];
}

}  // namespace

TEST_CASE("api client: lists, gets and a 404 Status") {
  FakeApiServer server;
  server.add_node(node("n1"));
  server.add_node(node("n2"));
  ApiClient client(server.client_config());

  auto list = client.call("GET", "/api/v1/nodes", "", "application/json");
  const json nodes = body_of(list);
  CHECK(list->status == 200);
  CHECK(nodes["kind"] == "NodeList");
  CHECK(nodes["metadata"]["resourceVersion"] == server.resource_version());
  REQUIRE(nodes["items"].size() == 2);
  CHECK(nodes["items"][0]["metadata"]["name"] == "n1");
  CHECK_FALSE(nodes["items"][0].contains("kind"));  // list items come without kind

  auto missing = client.call("GET", "/api/v1/namespaces/ml/pods/nope", "", "application/json");
  REQUIRE(missing.ok());
  CHECK(missing->status == 404);
  CHECK_FALSE(missing->ok());
  CHECK(api_error(*missing) == "HTTP 404: pods \"nope\" not found");

  // Every request says it wants JSON.
  for (const auto& r : server.requests()) CHECK(r.method == "GET");
}

TEST_CASE("api client: a chunked list keeps one resourceVersion across chunks") {
  FakeApiServer server;
  for (int i = 0; i < 7; ++i) server.add_node(node("n" + std::to_string(i)));
  ApiClient client(server.client_config());

  std::vector<std::string> names;
  std::string cont;
  std::string list_rv;
  int pages = 0;
  do {
    std::string path = "/api/v1/nodes?limit=3";
    if (!cont.empty()) path += "&continue=" + cont;
    const json page = body_of(client.call("GET", path, "", "application/json"));
    if (pages == 0) {
      list_rv = page["metadata"]["resourceVersion"];
      CHECK(page["metadata"]["remainingItemCount"] == 4);
      server.add_node(node("n9"));  // after the first chunk: not in this list
    }
    CHECK(page["metadata"]["resourceVersion"] == list_rv);
    for (const json& item : page["items"]) names.push_back(item["metadata"]["name"]);
    cont = page["metadata"].value("continue", "");
    ++pages;
  } while (!cont.empty());
  CHECK(pages == 3);
  CHECK(names == std::vector<std::string>{"n0", "n1", "n2", "n3", "n4", "n5", "n6"});

  // An expired continue token: 410.
  const json first = body_of(client.call("GET", "/api/v1/nodes?limit=3", "", "application/json"));
  server.expire_continue_tokens();
  auto expired = client.call(
      "GET", "/api/v1/nodes?limit=3&continue=" + first["metadata"]["continue"].get<std::string>(),
      "", "application/json");
  REQUIRE(expired.ok());
  CHECK(expired->status == 410);
  CHECK(body_of(expired)["reason"] == "Expired");
}

TEST_CASE("api client: a watch streams events and a bookmark, and a clean close returns 200") {
  FakeApiServer server;
  server.add_node(node("a"));
  const std::string rv = server.resource_version();
  ApiClient client(server.client_config());
  WatchRun watch(client, server,
                 "/api/v1/nodes?watch=1&resourceVersion=" + rv +
                     "&allowWatchBookmarks=true&timeoutSeconds=60");
  REQUIRE(server.wait_for_watches(1));
  const std::string added = server.add_node(node("b"));
  const std::string modified =
      server.update_node("b", [](json& n) { n["metadata"]["labels"]["x"] = "y"; });
  const std::string deleted = server.delete_node("a");
  server.add_pod(pod("ml", "p"));  // another resource: not on this watch
  server.send_bookmark();
  REQUIRE(watch.wait_events(4));
  server.close_watches();
  auto status = watch.finish();
  REQUIRE(status.ok());
  CHECK(*status == 200);

  const auto events = watch.events();
  REQUIRE(watch.types() == std::vector<std::string>{"ADDED", "MODIFIED", "DELETED", "BOOKMARK"});
  CHECK(events[0]["object"]["kind"] == "Node");
  CHECK(events[0]["object"]["apiVersion"] == "v1");
  CHECK(rv_of(events[0]["object"]) == added);
  CHECK(events[1]["object"]["metadata"]["labels"]["x"] == "y");
  CHECK(rv_of(events[1]["object"]) == modified);
  CHECK(events[2]["object"]["metadata"]["name"] == "a");
  CHECK(rv_of(events[2]["object"]) == deleted);
  CHECK(rv_of(events[3]["object"]) == server.resource_version());
}

TEST_CASE("api client: a watch from resourceVersion 0 starts with the current objects") {
  FakeApiServer server;
  server.add_node(node("a"));
  server.add_node(node("b"));
  ApiClient client(server.client_config());
  WatchRun watch(client, server, "/api/v1/nodes?watch=1&resourceVersion=0", 2);
  auto status = watch.finish();
  REQUIRE(status.ok());
  CHECK(*status == 200);  // stopped by on_event after two events
  CHECK(watch.types() == std::vector<std::string>{"ADDED", "ADDED"});
}

TEST_CASE("api client: 410 Gone from an expired resourceVersion, both forms") {
  FakeApiServer server;
  const std::string old_rv = server.add_node(node("a"));
  server.add_node(node("b"));
  server.compact();
  ApiClient client(server.client_config());
  const std::string path = "/api/v1/nodes?watch=1&allowWatchBookmarks=true&resourceVersion=";

  SECTION("as an ERROR event in a 200 stream") {
    WatchRun watch(client, server, path + old_rv);
    auto status = watch.finish();
    REQUIRE(status.ok());
    CHECK(*status == 200);
    const auto events = watch.events();
    REQUIRE(events.size() == 1);
    CHECK(events[0]["type"] == "ERROR");
    CHECK(events[0]["object"]["kind"] == "Status");
    CHECK(events[0]["object"]["code"] == 410);
    CHECK(events[0]["object"]["reason"] == "Expired");
    CHECK_THAT(events[0]["object"]["message"].get<std::string>(),
               Catch::StartsWith("too old resource version: " + old_rv));
  }
  SECTION("as the HTTP status of the watch request, whose body is not parsed as events") {
    server.set_expiry_form(FakeApiServer::ExpiryForm::kHttpStatus);
    WatchRun watch(client, server, path + old_rv);
    auto status = watch.finish();
    REQUIRE(status.ok());
    CHECK(*status == 410);
    CHECK(watch.events().empty());
  }
  SECTION("a watch from the current resourceVersion still works") {
    WatchRun watch(client, server, path + server.resource_version(), 1);
    REQUIRE(server.wait_for_watches(1));
    server.add_node(node("c"));
    REQUIRE(watch.finish().ok());
    CHECK(watch.types() == std::vector<std::string>{"ADDED"});
  }
}

TEST_CASE("api client: an open watch that expires gets the ERROR event and ends") {
  FakeApiServer server;
  ApiClient client(server.client_config());
  WatchRun watch(client, server,
                 "/api/v1/pods?watch=1&resourceVersion=" + server.resource_version());
  REQUIRE(server.wait_for_watches(1));
  server.add_pod(pod("ml", "p0"));
  REQUIRE(watch.wait_events(1));
  server.expire_open_watches();
  auto status = watch.finish();
  REQUIRE(status.ok());
  CHECK(*status == 200);
  CHECK(watch.types() == std::vector<std::string>{"ADDED", "ERROR"});
}

TEST_CASE("api client: a watch with a field selector sees objects leave and enter it") {
  FakeApiServer server;
  server.add_pod(pod("ml", "p0", "Running"));
  server.add_pod(pod("ml", "p1", "Succeeded"));
  ApiClient client(server.client_config());
  // status.phase!=Succeeded,status.phase!=Failed, URL-encoded.
  WatchRun watch(client, server,
                 "/api/v1/pods?watch=1&resourceVersion=" + server.resource_version() +
                     "&fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed",
                 3);
  server.update_pod("ml", "p0", [](json& p) { p["status"]["phase"] = "Succeeded"; });
  server.update_pod("ml", "p1", [](json& p) { p["metadata"]["labels"]["seen"] = "no"; });
  server.add_pod(pod("ml", "p2", "Failed"));
  server.add_pod(pod("ml", "p3", "Pending"));
  server.update_pod("ml", "p3", [](json& p) { p["spec"]["nodeName"] = "n1"; });
  REQUIRE(watch.finish().ok());
  const auto events = watch.events();
  REQUIRE(watch.types() == std::vector<std::string>{"DELETED", "ADDED", "MODIFIED"});
  CHECK(events[0]["object"]["metadata"]["name"] == "p0");
  CHECK(events[0]["object"]["status"]["phase"] == "Succeeded");
  CHECK(events[1]["object"]["metadata"]["name"] == "p3");
  CHECK(events[2]["object"]["spec"]["nodeName"] == "n1");
}

TEST_CASE("api client: watch ends — timeoutSeconds, dropped connection, error status") {
  FakeApiServer server;
  ApiClient client(server.client_config());
  const std::string path = "/api/v1/nodes?watch=1&resourceVersion=" + server.resource_version();

  SECTION("the server's timeoutSeconds is a normal end") {
    const auto start = std::chrono::steady_clock::now();
    auto status = client.watch(path + "&timeoutSeconds=1", [](const json&) { return true; });
    REQUIRE(status.ok());
    CHECK(*status == 200);
    CHECK(std::chrono::steady_clock::now() - start < 4s);
  }
  SECTION("a connection dropped mid-stream is a transport error") {
    WatchRun watch(client, server, path);
    REQUIRE(server.wait_for_watches(1));
    server.add_node(node("x"));
    REQUIRE(watch.wait_events(1));
    server.close_watches(/*abrupt=*/true);
    auto status = watch.finish();
    CHECK_FALSE(status.ok());
  }
  SECTION("a non-200 answer is returned as the status, its body not parsed as events") {
    server.fail_next("GET", "/api/v1/nodes", 1, 403, "nodes is forbidden");
    bool called = false;
    auto status = client.watch(path, [&](const json&) { return called = true; });
    REQUIRE(status.ok());
    CHECK(*status == 403);
    CHECK_FALSE(called);
  }
  SECTION("invalid JSON in the stream is an error") {
    httplib::Server bad;
    bad.Get("/api/v1/nodes", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("{\"type\":\"ADDED\",\"object\":{}}\n{nonsense}\n", "application/json");
    });
    const int port = bad.bind_to_any_port("127.0.0.1");
    std::thread t([&] { bad.listen_after_bind(); });
    while (!bad.is_running()) std::this_thread::sleep_for(1ms);
    ClientConfig config;
    config.server = "http://127.0.0.1:" + std::to_string(port);
    ApiClient bad_client(config);
    int events = 0;
    auto status = bad_client.watch("/api/v1/nodes?watch=1", [&](const json&) {
      ++events;
      return true;
    });
    bad.stop();
    t.join();
    REQUIRE_FALSE(status.ok());
    CHECK_THAT(status.error(), Catch::Contains("invalid JSON in watch stream"));
    CHECK(events == 1);
  }
}

TEST_CASE("api client: POST sends the body, its content type and the bearer token") {
  FakeApiServer server("secret");
  server.add_pod(pod("ml", "p0"));
  ClientConfig config = server.client_config();
  CHECK(config.token == "secret");
  ApiClient client(config);
  const json binding = {{"kind", "Binding"},
                        {"apiVersion", "v1"},
                        {"metadata", {{"name", "p0"}, {"namespace", "ml"}}},
                        {"target", {{"kind", "Node"}, {"name", "n1"}}}};
  auto r = client.call("POST", "/api/v1/namespaces/ml/pods/p0/binding", binding.dump(),
                       "application/json");
  REQUIRE(r.ok());
  CHECK(r->status == 201);
  CHECK(body_of(r)["status"] == "Success");
  const auto requests = server.requests();
  REQUIRE(requests.size() == 1);
  CHECK(requests[0].authorization == "Bearer secret");
  CHECK(json::parse(requests[0].body) == binding);
  CHECK(server.pod("ml", "p0").value()["spec"]["nodeName"] == "n1");
}

TEST_CASE("api client: calls reuse kept connections; calls at once get their own") {
  FakeApiServer server;
  server.add_pod(pod("ml", "p0"));
  ApiClient client(server.client_config());
  for (int i = 0; i < 3; ++i) {
    auto r = client.call("GET", "/api/v1/namespaces/ml/pods/p0", "", "");
    REQUIRE(r.ok());
    CHECK(r->status == 200);
  }
  const auto requests = server.requests();
  REQUIRE(requests.size() == 3);
  // One connection for the three calls: no handshake per call.
  CHECK(requests[1].remote_port == requests[0].remote_port);
  CHECK(requests[2].remote_port == requests[0].remote_port);
  // Calls at the same time each get a connection of their own, and all succeed.
  std::vector<std::thread> callers;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i) {
    callers.emplace_back([&] {
      auto r = client.call("GET", "/api/v1/namespaces/ml/pods/p0", "", "");
      if (r.ok() && r->status == 200) ++ok;
    });
  }
  for (std::thread& t : callers) t.join();
  CHECK(ok == 4);
}

TEST_CASE("api client: a 401 re-reads the token file and retries once") {
  TempDir dir;
  FakeApiServer server("token-1");
  ClientConfig config = server.client_config();
  config.token = "stale-config-token";
  config.token_file = dir.write("token", "token-1\n");
  ApiClient client(config);

  auto r = client.call("GET", "/api/v1/nodes", "", "application/json");
  REQUIRE(r.ok());
  CHECK(r->status == 200);  // the file wins over the config's token

  // The token rotates: the server wants token-2, the kubelet writes it to the file.
  server.set_token("token-2");
  dir.write("token", "token-2");
  server.clear_log();
  r = client.call("GET", "/api/v1/nodes", "", "application/json");
  REQUIRE(r.ok());
  CHECK(r->status == 200);
  auto requests = server.requests();
  REQUIRE(requests.size() == 2);
  CHECK(requests[0].authorization == "Bearer token-1");
  CHECK(requests[1].authorization == "Bearer token-2");

  // Without a 401 the file is not re-read within a minute.
  dir.write("token", "token-3");
  server.clear_log();
  REQUIRE(client.call("GET", "/api/v1/nodes", "", "application/json").ok());
  requests = server.requests();
  REQUIRE(requests.size() == 1);
  CHECK(requests[0].authorization == "Bearer token-2");

  // A 401 while the file holds the same token: no second try, the 401 is the answer.
  server.set_token("token-4");
  dir.write("token", "token-2");
  server.clear_log();
  r = client.call("GET", "/api/v1/nodes", "", "application/json");
  REQUIRE(r.ok());
  CHECK(r->status == 401);
  CHECK(api_error(*r) == "HTTP 401: Unauthorized");
  CHECK(server.requests().size() == 1);

  // Watches retry the same way.
  server.set_token("token-5");
  dir.write("token", "token-5");
  auto status = client.watch(
      "/api/v1/nodes?watch=1&timeoutSeconds=1&resourceVersion=" + server.resource_version(),
      [](const json&) { return true; });
  REQUIRE(status.ok());
  CHECK(*status == 200);
}

TEST_CASE("api client: a static token that is refused is not retried") {
  FakeApiServer server("right");
  ClientConfig config = server.client_config();
  config.token = "wrong";
  ApiClient client(config);
  auto r = client.call("GET", "/api/v1/pods", "", "application/json");
  REQUIRE(r.ok());
  CHECK(r->status == 401);
  CHECK(body_of(r)["reason"] == "Unauthorized");
  CHECK(server.requests().size() == 1);
}

TEST_CASE("api client: a server that never answers times out") {
  httplib::Server silent;
  std::atomic<bool> release{false};
  silent.Get("/api/v1/nodes", [&](const httplib::Request&, httplib::Response& res) {
    for (int i = 0; i < 500 && !release; ++i) std::this_thread::sleep_for(10ms);
    res.set_content("{}", "application/json");
  });
  const int port = silent.bind_to_any_port("127.0.0.1");
  std::thread t([&] { silent.listen_after_bind(); });
  while (!silent.is_running()) std::this_thread::sleep_for(1ms);

  ClientConfig config;
  config.server = "http://127.0.0.1:" + std::to_string(port);
  config.timeout = 300ms;
  ApiClient client(config);
  const auto start = std::chrono::steady_clock::now();
  auto r = client.call("GET", "/api/v1/nodes", "", "application/json");
  const auto took = std::chrono::steady_clock::now() - start;
  release = true;
  silent.stop();
  t.join();
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error(),
             Catch::Contains("GET http://127.0.0.1:" + std::to_string(port) + "/api/v1/nodes") &&
                 Catch::Contains("timed out"));
  CHECK(took >= 250ms);
  CHECK(took < 2s);
}

TEST_CASE("api client: transport and configuration errors") {
  ClientConfig config;
  config.server = "http://127.0.0.1:1";  // nothing listens there
  config.timeout = 1s;
  auto r = ApiClient(config).call("GET", "/api/v1/nodes", "", "application/json");
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error(), Catch::Contains("cannot connect"));

  config.server = "ftp://example";
  ApiClient bad(config);
  r = bad.call("GET", "/api/v1/nodes", "", "application/json");
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error(), Catch::Contains("must start with https://"));
  auto w = bad.watch("/api/v1/nodes?watch=1", [](const json&) { return true; });
  CHECK_FALSE(w.ok());

  config.server = "https://10.0.0.1:99999";
  CHECK_FALSE(ApiClient(config).call("GET", "/", "", "application/json").ok());
}

TEST_CASE("api client: an IPv6 server address in brackets") {
  httplib::Server v6;
  v6.Get("/api/v1/nodes", [](const httplib::Request& req, httplib::Response& res) {
    res.set_content(json{{"host", req.get_header_value("Host")}}.dump(), "application/json");
  });
  const int port = v6.bind_to_any_port("::1");
  if (port <= 0) {
    WARN("no IPv6 loopback here; skipped");
    return;
  }
  std::thread t([&] { v6.listen_after_bind(); });
  while (!v6.is_running()) std::this_thread::sleep_for(1ms);
  ClientConfig config;
  config.server = "http://[::1]:" + std::to_string(port);
  auto r = ApiClient(config).call("GET", "/api/v1/nodes", "", "application/json");
  v6.stop();
  t.join();
  CHECK(body_of(r)["host"] == "[::1]:" + std::to_string(port));
}

TEST_CASE("api client: a path prefix in the server URL is kept") {
  FakeApiServer server;
  server.add_node(node("n1"));
  ClientConfig config = server.client_config();
  config.server += "/";  // a trailing slash is dropped
  auto r = ApiClient(config).call("GET", "/api/v1/nodes", "", "application/json");
  REQUIRE(r.ok());
  CHECK(r->status == 200);
  config.server = server.url() + "/k8s/clusters/c-1";
  r = ApiClient(config).call("GET", "/api/v1/nodes", "", "application/json");
  REQUIRE(r.ok());
  // The fake serves no prefix: the request went to /k8s/clusters/c-1/api/v1/nodes.
  CHECK(r->status == 404);
  CHECK(api_error(*r) == "HTTP 404: the server could not find the requested resource");
}

TEST_CASE("api client: concurrent calls and watches on one client") {
  FakeApiServer server;
  for (int i = 0; i < 20; ++i) server.add_pod(pod("ml", "p" + std::to_string(i)));
  ApiClient client(server.client_config());
  WatchRun watch(client, server,
                 "/api/v1/pods?watch=1&resourceVersion=" + server.resource_version());
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        auto r = client.call("GET", "/api/v1/namespaces/ml/pods/p" + std::to_string((t + i) % 20),
                             "", "application/json");
        if (r.ok() && r->status == 200) ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(ok == 80);
  REQUIRE(server.wait_for_watches(1));
  server.add_pod(pod("ml", "late"));
  REQUIRE(watch.wait_events(1));
  server.close_watches();
  CHECK(watch.finish().ok());
}

TEST_CASE("api_error: the Status message, else the body") {
  CHECK(
      api_error({409, R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
                      R"("message":"pod p is already assigned to node \"n\"","reason":"Conflict",)"
                      R"("code":409})"}) == "HTTP 409: pod p is already assigned to node \"n\"");
  CHECK(api_error({502, "bad gateway\n"}) == "HTTP 502: bad gateway");
  CHECK(api_error({500, R"({"no":"message"})"}) == R"(HTTP 500: {"no":"message"})");
  CHECK(api_error({503, ""}) == "HTTP 503: (empty body)");
  CHECK(api_error({500, std::string(5000, 'x')}).size() < 1100);
}
