// gapless-microbench: in-process latency of filter + prioritize for one pod against generated
// clusters (no HTTP, no JSON): the engine's own share of each kube-scheduler cycle.
//
//   gapless-microbench [--nodes 1000,5000] [--iterations 300] [--fill 0.5]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

#include "gapless/placement/engine.h"
#include "synthetic_cluster.h"

using namespace gapless;

namespace {

struct Shape {
  const char* name;
  model::GpuRequest req;
};

std::vector<Shape> shapes() {
  std::vector<Shape> out;
  model::GpuRequest r;
  r.kind = model::RequestKind::kWhole;
  r.whole = 1;
  out.push_back({"1 whole GPU", r});
  r.whole = 2;
  r.topology = model::TopologyWish::kNvlinkPreferred;
  out.push_back({"2 whole GPUs, nvlink-preferred", r});
  r.whole = 4;
  r.topology = model::TopologyWish::kNvlinkRequired;
  out.push_back({"4 whole GPUs, nvlink-required", r});
  r = {};
  r.kind = model::RequestKind::kShared;
  r.shared = {16384, 300, 1};
  out.push_back({"shared 16 GiB / 300 milli", r});
  r = {};
  r.kind = model::RequestKind::kMig;
  r.mig_profile = "3g.40gb";
  r.mig_count = 1;
  out.push_back({"MIG 3g.40gb", r});
  return out;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * v.size()))];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gapless-microbench: in-process filter+prioritize latency"};
  std::vector<int> sizes = {1000, 5000};
  int iterations = 300;
  double fill = 0.5;
  app.add_option("--nodes", sizes, "cluster sizes (8 GPUs per node)")->delimiter(',');
  app.add_option("--iterations", iterations, "timed filter+prioritize pairs per case");
  app.add_option("--fill", fill, "fraction of GPUs taken before timing");
  CLI11_PARSE(app, argc, argv);

  const placement::Policy policy = placement::builtin_policy();
  std::printf("| nodes | GPUs | pod | passed | p50 ms | p99 ms | max ms |\n");
  std::printf("|---:|---:|---|---:|---:|---:|---:|\n");
  for (int n : sizes) {
    const model::Cluster cluster = bench::synthetic_cluster(n, fill, 42);
    std::vector<std::string> names;
    for (const model::Node* node : cluster.nodes()) names.push_back(node->name);
    for (const Shape& s : shapes()) {
      std::vector<double> ms;
      std::size_t passed = 0;
      for (int i = 0; i < iterations; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        auto f = placement::filter(cluster, s.req, names);
        auto scores = placement::prioritize(cluster, s.req, policy.profiles[0], f.passed);
        const auto t1 = std::chrono::steady_clock::now();
        passed = f.passed.size() + (scores.empty() ? 0 : 0);
        ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      }
      std::printf("| %d | %d | %s | %zu | %.3f | %.3f | %.3f |\n", n, n * 8, s.name, passed,
                  percentile(ms, 0.50), percentile(ms, 0.99), *std::max_element(ms.begin(), ms.end()));
    }
  }
  return 0;
}
