// Bursts of pods bound to one node at once, admitted the way the real v1.26 kubelet admits them
// (tests/agent/fake_kubelet.h: batches sorted by creationTimestamp at one-second resolution,
// ties in reverse order), against the device plugins for whole GPUs and shares. Issue 25: with
// the old matching rule (the oldest bound pending pod of the asked size), same-size pods bound
// in one second swapped GPUs, and after churn one GPU was handed to two containers.
#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <set>

#include "gapless/placement/pairing_gate.h"
#include "plugin_rig.h"

using namespace gapless;
using nlohmann::json;
using Kubelet = test::FakeKubelet;

namespace {

constexpr int kGpus = 16;
constexpr int kSlots = 4;
const std::string kWhole = agent::kWholeGpuResource;
const std::string kShared = agent::kSharedGpuResource;

std::string uuid(int i) {
  return "GPU-" + std::to_string(100 + i) + "-burst";
}

struct Ask {
  std::string container, resource;
  int count = 0;
  bool init = false;
};

// A pod as the simulated extender binds it: its containers' asks and its record's grants.
struct PodSpec {
  std::string name;
  std::vector<Ask> asks;
  std::vector<model::GpuGrant> grants;  // empty: no GPU
};

PodSpec whole(const std::string& name, std::vector<int> gpus) {
  PodSpec p{name, {{"c", kWhole, static_cast<int>(gpus.size()), false}}, {}};
  for (int g : gpus) p.grants.push_back({g, uuid(g), 0, 0, 0});
  return p;
}

PodSpec share(const std::string& name, int gpu, std::int64_t mib, int milli) {
  return PodSpec{name, {{"c", kShared, 1, false}}, {{gpu, uuid(gpu), mib, milli, 0}}};
}

placement::DeviceClasses classes_of(const PodSpec& p) {
  placement::DeviceClasses out;
  for (const Ask& a : p.asks) out.insert({a.resource, a.count});
  return out;
}

// The GPUs the container gets by the record rule: init containers the first grants, the others
// consecutive ones.
std::vector<model::GpuGrant> expected(const PodSpec& p, const Ask& ask) {
  std::size_t offset = 0;
  for (const Ask& a : p.asks) {
    if (&a == &ask) break;
    if (!a.init && a.resource == ask.resource) offset += static_cast<std::size_t>(a.count);
  }
  if (ask.init) offset = 0;
  return {p.grants.begin() + static_cast<long>(offset),
          p.grants.begin() + static_cast<long>(offset + static_cast<std::size_t>(ask.count))};
}

// The simulated extender (binds, with or without the pairing gate) and the node under test.
struct Burst : test::PluginFakes {
  explicit Burst(bool gated) : gated(gated) {
    std::vector<agent::GpuState> gpus;
    for (int i = 0; i < kGpus; ++i) {
      agent::GpuState g;
      g.index = i;
      g.uuid = uuid(i);
      gpus.push_back(g);
    }
    whole_plugin = std::make_unique<agent::DevicePlugin>(options(kWhole), client, nullptr);
    whole_plugin->set_gpus(gpus);
    start(*whole_plugin, kWhole, kGpus);
    auto o = options(kShared);
    o.share_slots = kSlots;
    shared_plugin = std::make_unique<agent::DevicePlugin>(o, client, nullptr);
    shared_plugin->set_gpus(gpus);
    start(*shared_plugin, kShared, kGpus * kSlots);
  }

  void bind(const PodSpec& p, const std::string& created) {
    specs[p.name] = p;
    created_at[p.name] = created;
    if (gated) {
      auto d = gate.try_open("gpu-1", "uid-" + p.name, "ml/" + p.name, classes_of(p), clock);
      if (!d.open) {
        waiting[d.ticket] = p.name;
        return;
      }
    }
    post(p.name);
  }

  // The Binding lands: the pod, with its record, is on the node's pod list and on its way to
  // the kubelet.
  void post(const std::string& name) {
    const PodSpec& p = specs.at(name);
    model::Allocation a = test::record_of(name);
    a.gpus = p.grants;
    json containers = json::array(), inits = json::array();
    Kubelet::Pod kp{"uid-" + name, name, created_at.at(name), {}};
    for (const Ask& ask : p.asks) {
      (ask.init ? inits : containers)
          .push_back({{"name", ask.container},
                      {"resources", {{"limits", {{ask.resource, std::to_string(ask.count)}}}}}});
      if (ask.count > 0)
        kp.containers.push_back({ask.container, ask.resource, ask.count, ask.init});
    }
    json pod =
        test::bound_pod(name, created_at.at(name), containers, p.grants.empty() ? nullptr : &a);
    pod["metadata"]["creationTimestamp"] = created_at.at(name);
    if (!inits.empty()) pod["spec"]["initContainers"] = inits;
    api.add_pod(pod);
    inbox.push_back(std::move(kp));
  }

  // The kubelet admits what reached it, batch after batch; the gate lets waiting binds go as
  // the plugin marks pods allocated. Returns the number of batches.
  int settle() {
    int batches = 0;
    while (!inbox.empty()) {
      ++batches;
      auto batch = std::move(inbox);
      inbox.clear();
      clock += 1;
      for (auto& r : kubelet.admit_batch(std::move(batch), Kubelet::Ties::kReversed)) {
        results[r.name] = r;
        if (!gated) continue;
        const auto pod = api.pod("ml", r.name);
        const bool allocated = pod && pod->contains("metadata") &&
                               (*pod)["metadata"].contains("annotations") &&
                               (*pod)["metadata"]["annotations"].contains("gapless.io/allocated");
        // A pod the kubelet refused leaves Pending (Failed): the gate closes on that too.
        if (!allocated && r.admitted && !specs.at(r.name).grants.empty()) continue;
        for (const auto& released : gate.close(
                 "uid-" + r.name,
                 allocated ? placement::CloseReason::kAllocated : placement::CloseReason::kStarted,
                 clock)) {
          post(waiting.at(released.ticket));
          waiting.erase(released.ticket);
        }
      }
    }
    return batches;
  }

  void remove(const std::string& name) {
    api.delete_pod("ml", name);
    kubelet.remove_pod("uid-" + name);
    results.erase(name);
    gate.close("uid-" + name, placement::CloseReason::kDeleted, clock);
  }

  // Every admitted container got exactly its record's GPUs (and share limits); no GPU is held
  // by two pods (whole), or whole by one and shared by another.
  void check() {
    std::map<std::string, std::string> whole_holder;  // GPU -> pod
    std::map<std::string, std::set<std::string>> sharers;
    for (const auto& [name, r] : results) {
      if (!r.admitted) continue;
      const PodSpec& p = specs.at(name);
      for (const Ask& ask : p.asks) {
        if (ask.count == 0) continue;
        const auto& got = r.containers.at(ask.container);
        std::string want;
        for (const auto& g : expected(p, ask)) want += (want.empty() ? "" : ",") + g.uuid;
        INFO("pod " << name << " container " << ask.container);
        CHECK(test::visible(got) == want);
        if (ask.resource == kShared) {
          const auto mib = std::to_string(expected(p, ask)[0].memory_mib) + "m";
          CHECK(got.env.count("CUDA_DEVICE_MEMORY_LIMIT_0") == 1);
          if (got.env.count("CUDA_DEVICE_MEMORY_LIMIT_0") == 1) {
            CHECK(got.env.at("CUDA_DEVICE_MEMORY_LIMIT_0") == mib);
          }
        }
        const std::string devices = test::visible(got);
        std::string_view rest = devices;
        while (!rest.empty()) {
          const auto comma = rest.find(',');
          const std::string gpu(rest.substr(0, comma));
          rest = comma == std::string_view::npos ? "" : rest.substr(comma + 1);
          if (ask.resource == kShared) {
            sharers[gpu].insert(name);
            continue;
          }
          auto [it, fresh] = whole_holder.emplace(gpu, name);
          INFO("GPU " << gpu);
          CHECK((fresh || it->second == name));
        }
      }
    }
    for (const auto& [gpu, pods] : sharers) {
      const auto whole = whole_holder.find(gpu);
      INFO("GPU " << gpu << " shared and held whole by "
                  << (whole == whole_holder.end() ? "nobody" : whole->second));
      CHECK(whole == whole_holder.end());
    }
  }

  bool gated;
  double clock = 0;
  placement::PairingGate gate;
  std::unique_ptr<agent::DevicePlugin> whole_plugin, shared_plugin;
  std::map<std::string, PodSpec> specs;
  std::map<std::string, std::string> created_at;
  std::map<std::uint64_t, std::string> waiting;  // ticket -> pod
  std::vector<Kubelet::Pod> inbox;
  std::map<std::string, Kubelet::PodResult> results;
};

// The burst of issue 25 on one 16-GPU node, bound within one second.
std::vector<PodSpec> first_burst() {
  std::vector<PodSpec> pods;
  for (int i = 0; i < 6; ++i) pods.push_back(whole("one-" + std::to_string(i), {i}));
  pods.push_back(whole("two-0", {6, 7}));
  pods.push_back(whole("two-1", {8, 9}));
  pods.push_back(whole("four", {10, 11, 12, 13}));
  pods.push_back(share("share-20g", 14, 20480, 250));
  pods.push_back(share("share-10g", 14, 10240, 0));
  pods.push_back(share("share-8g", 15, 8192, 300));
  pods.push_back(share("share-4g", 15, 4096, 100));
  pods.push_back(PodSpec{"cpu-0", {}, {}});
  pods.push_back(PodSpec{"cpu-1", {}, {}});
  pods.push_back(PodSpec{"cpu-2", {}, {}});
  return pods;
}

}  // namespace

TEST_CASE("a burst bound in one second: no container gets another pod's GPUs", "[pairing]") {
  // Without the gate every same-size pod is pending at once. The plugin must not guess: the
  // pods it cannot tell apart fail admission, none gets another pod's GPUs.
  Burst b(false);
  for (const auto& p : first_burst()) b.bind(p, "2026-11-23T10:00:00Z");
  b.settle();
  b.check();
  CHECK(b.results.at("two-0").admitted == false);  // two-0 and two-1 are alike
  CHECK(b.results.at("four").admitted);            // the only 4-GPU pod: never ambiguous
  CHECK(b.results.at("cpu-0").admitted);
  for (const auto& [name, r] : b.results) {
    if (!r.admitted) CHECK_THAT(r.error, Catch::Contains("cannot tell which"));
  }
}

TEST_CASE("with the pairing gate a burst and churn are all admitted with their records' GPUs",
          "[pairing]") {
  Burst b(true);
  for (const auto& p : first_burst()) b.bind(p, "2026-11-23T10:00:00Z");
  const int batches = b.settle();
  for (const auto& [name, r] : b.results) {
    INFO(name << ": " << r.error);
    CHECK(r.admitted);
  }
  CHECK(b.results.size() == 16);
  CHECK(batches >= 6);  // the six 1-GPU pods go one after another
  b.check();

  // Churn: half of the pods go; a second, smaller burst takes their GPUs.
  for (const char* gone : {"one-0", "one-2", "one-4", "two-0", "share-20g", "share-8g", "cpu-0"}) {
    b.remove(gone);
  }
  b.api.update_pod("ml", "one-1", [](json& p) { p["status"]["phase"] = "Running"; });
  // The init container's GPU is reused by app container "a" (the kubelet's devicesToReuse).
  PodSpec init{"with-init",
               {{"setup", kWhole, 1, true}, {"a", kWhole, 1, false}, {"b", kWhole, 1, false}},
               {{2, uuid(2), 0, 0, 0}, {4, uuid(4), 0, 0, 0}}};
  const std::vector<PodSpec> second = {whole("again-0", {0}), init,
                                       share("again-s1", 14, 30720, 500),
                                       share("again-s2", 15, 2048, 0), whole("again-two", {6, 7})};
  for (const auto& p : second) b.bind(p, "2026-11-23T10:00:07Z");
  b.settle();
  for (const auto& [name, r] : b.results) {
    INFO(name << ": " << r.error);
    CHECK(r.admitted);
  }
  b.check();
}

// Not a check: what the gate costs in the fake harness (run with "[.measure]"). It measures the
// plugin's and the fake API server's work and the number of admission rounds, not a real
// kubelet's admission (scripts/kubelet_e2e.sh measures that).
TEST_CASE("measure: a 16-pod burst with and without the gate", "[.measure]") {
  for (const bool gated : {false, true}) {
    Burst b(gated);
    const auto start = std::chrono::steady_clock::now();
    for (const auto& p : first_burst()) b.bind(p, "2026-11-23T10:00:00Z");
    const int batches = b.settle();
    const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
    int admitted = 0;
    for (const auto& [name, r] : b.results) admitted += r.admitted ? 1 : 0;
    std::printf(
        "%s: %d of 16 pods admitted, %d admission rounds, %.1f ms first bind to last "
        "Allocate (fake kubelet, fake API server)\n",
        gated ? "gate" : "no gate", admitted, batches, took.count());
  }
}
