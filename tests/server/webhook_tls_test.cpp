// The admission webhook over HTTPS on 127.0.0.1 (server/webhook.h): the AdmissionReview round
// trip as the API server makes it, a malformed review answered 400 with a reason and the server
// still serving, plain HTTP refused at start, and the certificate reload keeping the served pair
// when the new one is bad.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "gapless/server/webhook.h"
#include "test_server.h"
#include "tls_support.h"

namespace gapless::test {
namespace {

using namespace tls;

struct Webhook {
  explicit Webhook(server::WebhookOptions o)
      : extender(demo_cluster(), placement::builtin_policy(), binder, metrics),
        server(extender, std::move(o)) {}
  server::Metrics metrics;
  server::InMemoryBinder binder;
  server::Extender extender;
  server::WebhookServer server;
};

server::WebhookOptions webhook_options(const std::string& cert, const std::string& key) {
  server::WebhookOptions o;
  o.tls_cert_file = cert;
  o.tls_key_file = key;
  o.scheduler_name = "gpu-scheduler";
  o.workers = 2;
  o.cert_check_interval = std::chrono::seconds(0);
  return o;
}

std::string review(const json& pod) {
  return json{{"apiVersion", "admission.k8s.io/v1"},
              {"kind", "AdmissionReview"},
              {"request",
               {{"uid", "u-1"},
                {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                {"operation", "CREATE"},
                {"object", pod}}}}
      .dump();
}

}  // namespace

TEST_CASE("webhook: AdmissionReview round trip over TLS on 127.0.0.1", "[server][webhook]") {
  const Pki* pki = pki_or_skip();
  if (pki == nullptr) return;
  Webhook w(webhook_options(pki->path("server.crt"), pki->path("server.key")));
  auto port = w.server.bind("127.0.0.1", 0);
  REQUIRE(port);
  w.server.start();
  auto client = https_client("127.0.0.1", *port, pki->path("ca.crt"));

  const json pinned = gpu_pod("p", "uid-p", 1, {{"gapless.io/gpu-models", "tesla-t4"}});
  auto res = client->Post("/mutate", review(pinned), "application/json");
  REQUIRE(res);
  REQUIRE(res->status == 200);
  json r = json::parse(res->body)["response"];
  CHECK(r["uid"] == "u-1");
  CHECK(r["allowed"] == true);
  CHECK(r["patchType"] == "JSONPatch");

  const json bad = gpu_pod("p", "uid-p", 1, {{"gapless.io/topology", "sometimes"}});
  res = client->Post("/validate", review(bad), "application/json");
  REQUIRE(res);
  REQUIRE(res->status == 200);
  r = json::parse(res->body)["response"];
  CHECK(r["allowed"] == false);
  CHECK_THAT(r["status"]["message"].get<std::string>(), Catch::StartsWith("gapless.io/topology:"));

  res = client->Post("/validate", "{\"not\": \"a review\"}", "application/json");
  REQUIRE(res);
  CHECK(res->status == 400);
  CHECK_THAT(res->body, Catch::Contains("AdmissionReview"));
  res = client->Post("/validate", std::string(5000, '{'), "application/json");
  REQUIRE(res);
  CHECK(res->status == 400);

  // Still serving after both.
  CHECK(https_ok(*pki, *port, "/readyz"));
  res = client->Post("/filter", "{}", "application/json");  // the verbs are not served here
  REQUIRE(res);
  CHECK(res->status == 404);
  w.server.stop();
}

TEST_CASE("webhook: refuses to serve plain HTTP", "[server][webhook]") {
  Webhook w(webhook_options("", ""));
  auto port = w.server.bind("127.0.0.1", 0);
  REQUIRE_FALSE(port);
  CHECK_THAT(port.error(), Catch::Contains("--webhook-tls-cert"));
}

TEST_CASE("webhook: a bad renewed certificate leaves the served one", "[server][webhook]") {
  const Pki* pki = pki_or_skip();
  if (pki == nullptr) return;
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(pki->path("reload"));
  fs::create_directories(dir);
  fs::copy_file(pki->path("server.crt"), dir / "tls.crt", fs::copy_options::overwrite_existing);
  fs::copy_file(pki->path("server.key"), dir / "tls.key", fs::copy_options::overwrite_existing);
  server::WebhookOptions o =
      webhook_options((dir / "tls.crt").string(), (dir / "tls.key").string());
  server::Metrics metrics;
  server::InMemoryBinder binder;
  server::Extender extender(demo_cluster(), placement::builtin_policy(), binder, metrics);
  struct NoRoutes : door::RouteTable {
    door::Route find(const std::string&, const std::string& p) const override {
      return {door::Route::Lane::kLoop, p, false, false, false};
    }
    door::Answer answer_now(const door::Route&) const override {
      return door::text_answer(200, "ok\n");
    }
    void handle(const door::Route&, door::Request, door::Reply) override {}
    door::Answer refusal(const door::Route&, int s, const std::string& why) const override {
      return door::text_answer(s, why);
    }
    door::Answer overloaded(const door::Route&) const override {
      return door::text_answer(503, "busy");
    }
  } routes;
  door::Door d(routes, o);
  auto port = d.bind("127.0.0.1", 0);
  REQUIRE(port);
  std::thread loop([&] { d.run(); });

  std::ofstream(dir / "tls.crt") << "half-written\n";
  Status s = d.reload_tls();
  CHECK_FALSE(s);
  CHECK_THAT(s.error(), Catch::Contains("--tls-cert"));
  CHECK(https_ok(*pki, *port));  // the served pair stays

  fs::copy_file(pki->path("server.crt"), dir / "tls.crt", fs::copy_options::overwrite_existing);
  CHECK(d.reload_tls());
  CHECK(https_ok(*pki, *port));
  d.stop();
  loop.join();
}

}  // namespace gapless::test
