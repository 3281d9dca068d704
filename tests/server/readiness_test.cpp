// Until the model is complete (Kubernetes mode, first lists not yet applied) every verb answers
// with an Error rather than deciding on a partial model, and /readyz says 503.
#include <atomic>

#include "test_server.h"

using namespace gapless;
using namespace gapless::test;

TEST_CASE("verbs refuse to decide and /readyz is 503 until the model is ready", "[server]") {
  std::atomic<bool> ready{false};
  server::HttpOptions options;
  TestServer s(demo_cluster(), placement::builtin_policy(), options);
  s.extender().set_readiness([&ready] { return ready.load(); });
  // The HTTP server's own readiness answer comes from the extender in gapless-extender; here the
  // extender alone is checked, as the verbs are what kube-scheduler sees.
  const std::string before = s.state();
  const json p = gpu_pod("early", "uid-early", 1);

  json f = s.call("/filter", extender_args(p, {"h100-nvs-01"}));
  CHECK(f.at("Error").get<std::string>().find("still loading") != std::string::npos);
  CHECK(f.at("NodeNames").is_null());
  json pr = s.call("/prioritize", extender_args(p, {"h100-nvs-01"}));
  CHECK(pr.at("Error").get<std::string>().find("still loading") != std::string::npos);
  json b = s.call("/bind", bind_args("early", "uid-early", "h100-nvs-01"));
  CHECK(b.at("Error").get<std::string>().find("still loading") != std::string::npos);
  json pe = s.call("/preempt", json{{"Pod", p}, {"NodeNameToMetaVictims", nullptr}}.dump());
  CHECK(pe.at("Error").get<std::string>().find("still loading") != std::string::npos);
  CHECK(s.state() == before);

  ready = true;
  CHECK(s.filter_and_bind(p, "h100-nvs-01") == "");
}

TEST_CASE("/readyz follows the readiness callback", "[server]") {
  std::atomic<bool> ready{false};
  server::HttpOptions options;
  options.ready = [&ready] { return ready.load(); };
  TestServer s(demo_cluster(), placement::builtin_policy(), options);
  CHECK(s.get("/readyz").status == 503);
  CHECK(s.get("/healthz").status == 200);  // alive while loading: no restart loop
  ready = true;
  CHECK(s.get("/readyz").status == 200);
}
