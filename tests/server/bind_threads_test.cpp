// Binds on threads of their own (--bind-threads): a bind waiting for the API server holds none
// of the HTTP workers, so filter answers while binds wait; a bind that finds the bind threads
// full or stopped is answered with an Error at once, never dropped.
#include <atomic>
#include <catch2/catch.hpp>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "eventually.h"
#include "gate.h"
#include "test_server.h"

namespace gapless::test {
namespace {

// A binder whose binds wait at `gate` (as for a slow API server), then bind in memory.
class HeldBinder final : public k8s::Binder {
 public:
  explicit HeldBinder(Gate& gate) : gate_(gate) {}
  Status bind(const k8s::BindRequest& req) override {
    gate_.pass();
    return inner_.bind(req);
  }
  std::size_t bound() const { return inner_.bindings().size(); }

 private:
  Gate& gate_;
  k8s::InMemoryBinder inner_;
};

// An extender over the demo cluster whose binds run on `threads` bind threads and wait at `gate`.
struct HeldExtender {
  HeldExtender(std::size_t threads, std::size_t max_queue) {
    extender.enable_bind_threads(threads, max_queue);
  }
  Gate gate;
  HeldBinder binder{gate};
  server::Metrics metrics;
  server::Extender extender{demo_cluster(), placement::builtin_policy(), binder, metrics};
};

std::string error_of(const std::string& answer) {
  return json::parse(answer).at("Error").get<std::string>();
}

// Filters pod `name` onto h100-nvs-01 (bind needs the pod seen by filter) and returns its bind
// arguments there.
std::string filtered(server::Extender& extender, const std::string& name) {
  const json pod = gpu_pod(name, "uid-" + name, 1);
  REQUIRE(error_of(extender.filter(extender_args(pod, {"h100-nvs-01"}))).empty());
  return bind_args(name, "uid-" + name, "h100-nvs-01");
}

}  // namespace

TEST_CASE("binds waiting for the API server hold no HTTP worker: filter answers meanwhile",
          "[server][bind]") {
  HeldExtender x(4, 16);
  Gate& gate = x.gate;  // references, not a structured binding: clang's lambdas cannot capture one
  HeldBinder& binder = x.binder;
  server::Extender& extender = x.extender;
  server::HttpOptions options;
  options.workers = 1;  // a bind holding it would keep the filter below waiting
  options.metrics = &x.metrics;
  server::HttpServer http(extender, std::move(options));
  auto port = http.bind("127.0.0.1", 0);
  REQUIRE(port);
  std::thread serving([&http] { http.serve(); });
  auto client = [&port] {
    httplib::Client c("127.0.0.1", *port);
    c.set_read_timeout(30);
    return c;
  };
  const std::vector<std::string> binds = {filtered(extender, "a"), filtered(extender, "b")};
  std::vector<std::string> answers(binds.size());
  std::vector<std::jthread> binding;  // joined also when a REQUIRE fails (after the gate opens)
  for (std::size_t i = 0; i < binds.size(); ++i) {
    binding.emplace_back([&, i] {
      auto res = client().Post("/bind", binds[i], "application/json");
      if (res) answers[i] = res->body;
    });
  }
  {
    OpenOnExit opener{gate};
    REQUIRE(eventually([&] { return gate.entered() == 2; }));  // both at the API server
    auto res = client().Post("/filter", extender_args(gpu_pod("c", "uid-c", 1), {"h100-nvs-01"}),
                             "application/json");
    REQUIRE(res);
    CHECK(res->status == 200);
    CHECK(error_of(res->body).empty());
    CHECK(binder.bound() == 0);  // the binds were still waiting while filter answered
  }
  for (std::jthread& t : binding) t.join();
  for (const std::string& a : answers) {
    REQUIRE(json::accept(a));
    CHECK(error_of(a).empty());
  }
  CHECK(binder.bound() == 2);
  // As gapless-extender stops: the bind threads first, so that no bind thread is still letting
  // go of a reply (and its connection) when the server goes. The other order freed the server
  // under a bind thread's feet now and then on a loaded machine (heap corruption, or a hang).
  extender.stop_binds();
  http.stop();
  serving.join();
}

TEST_CASE("binds beyond the bind threads' queue, or after they stop, are answered with an Error",
          "[server][bind]") {
  HeldExtender x(1, 1);
  Gate& gate = x.gate;
  HeldBinder& binder = x.binder;
  server::Extender& extender = x.extender;
  const std::string a = filtered(extender, "a"), b = filtered(extender, "b"),
                    c = filtered(extender, "c");
  std::promise<std::string> a_answer;
  std::optional<std::string> b_answer;
  std::atomic<bool> b_answered{false};
  std::jthread stopping;  // joined also when a REQUIRE fails
  {
    OpenOnExit opener{gate};
    extender.bind_async(a, [&](std::string s) { a_answer.set_value(std::move(s)); });
    REQUIRE(eventually([&] { return gate.entered() == 1; }));  // a runs on the one thread
    // b waits for the thread.
    extender.bind_async(b, [&](std::string s) {
      b_answer = std::move(s);
      b_answered = true;
    });
    // c finds one bind waiting already: refused at once, not queued.
    const std::string refused = error_of(extender.bind(c));
    CHECK(refused.find("binds waiting for a bind thread (--bind-threads)") != std::string::npos);
    // Stopping answers b (still waiting) at once, then waits for a, let go only after that.
    stopping = std::jthread([&extender] { extender.stop_binds(); });
    REQUIRE(eventually([&] { return b_answered.load(); }));
  }
  stopping.join();
  CHECK(error_of(a_answer.get_future().get()).empty());
  REQUIRE(b_answer);
  CHECK(error_of(*b_answer).find("shutting down") != std::string::npos);
  CHECK(error_of(extender.bind(c)).find("shutting down") != std::string::npos);
  CHECK(binder.bound() == 1);
}

}  // namespace gapless::test
