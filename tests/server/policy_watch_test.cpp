// PolicyWatch: a content change is a reload even when size and modification time stay the same
// (a ConfigMap symlink swap), and a FIFO at the policy path never blocks the watcher or a reload.
#include "gapless/server/policy_watch.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <string>

#include "gapless/policy/loader.h"
#include "live_server.h"
#include "temp_dir.h"

namespace gapless::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string two_profiles(const std::string& default_profile) {
  return "version: 1\ndefault: " + default_profile + R"(
profiles:
  - name: bundle
    node: {strategies: {bundle: 1}}
    gpu: {strategies: {bundle: 1}}
  - name: spread
    node: {strategies: {spread: 1}}
    gpu: {strategies: {spread: 1}}
)";
}

// The policy reload counter's value for `outcome` ("ok" or "error"), 0 if it has no sample.
double reloads(server::Metrics& m, const std::string& outcome) {
  const std::string text = m.serialize();
  const std::string key = "gapless_policy_reloads_total{outcome=\"" + outcome + "\"} ";
  const auto at = text.find(key);
  return at == std::string::npos ? 0 : std::stod(text.substr(at + key.size()));
}

struct World {
  server::Metrics metrics;
  server::InMemoryBinder binder;
  server::Extender extender{cluster_of(json::array({gfd_node("n", 1)})),
                            placement::builtin_policy(), binder, metrics};
};

}  // namespace

TEST_CASE("policy watch: a symlink swap to a file of the same size and mtime is reloaded",
          "[server][policy-watch]") {
  TempDir dir;
  const std::string a = dir.write("a.yaml", two_profiles("bundle"));
  const std::string b = dir.write("b.yaml", two_profiles("spread"));
  REQUIRE(fs::file_size(a) == fs::file_size(b));
  fs::last_write_time(b, fs::last_write_time(a));
  const std::string link = dir.file("policy.yaml");
  fs::create_symlink(a, link);

  World w;
  server::PolicyWatch watch(w.extender, w.metrics, link, 10ms);
  std::this_thread::sleep_for(50ms);
  CHECK(reloads(w.metrics, "ok") == 0);  // nothing changed yet

  fs::create_symlink(b, dir.file("next"));
  fs::rename(dir.file("next"), link);  // atomic, as kubelet swaps ConfigMap contents
  CHECK(eventually([&] { return reloads(w.metrics, "ok") == 1; }, 5s));
  std::this_thread::sleep_for(50ms);
  CHECK(reloads(w.metrics, "ok") == 1);  // once per change, not per poll
}

TEST_CASE("policy watch: a FIFO at the path is refused at once, never waited on",
          "[server][policy-watch]") {
  TempDir dir;
  const std::string fifo = dir.file("policy.yaml");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);

  auto text = policy::read_policy_text(fifo);
  REQUIRE_FALSE(text);
  CHECK(text.error().find("not a regular file") != std::string::npos);
  CHECK_FALSE(policy::load_policy_file(fifo));

  World w;
  const auto t0 = std::chrono::steady_clock::now();
  {
    server::PolicyWatch watch(w.extender, w.metrics, fifo, 10ms);
    CHECK_FALSE(watch.reload_now());  // SIGHUP's path: an error, not a hang
    watch.request_reload();
    CHECK(eventually([&] { return reloads(w.metrics, "error") == 2; }, 5s));
  }  // and the watcher thread stops
  CHECK(std::chrono::steady_clock::now() - t0 < 5s);

  // A directory and a device are refused as well.
  CHECK(policy::read_policy_text(dir.path().string()).error().find("directory") !=
        std::string::npos);
  CHECK(policy::read_policy_text("/dev/zero").error().find("not a regular file") !=
        std::string::npos);
}

}  // namespace gapless::test
