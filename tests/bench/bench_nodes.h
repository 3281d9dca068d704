// Small hand-built trace nodes and requests for the bench tests.
#pragma once

#include <string>
#include <vector>

#include "gapless/model/node.h"
#include "gapless/model/request.h"
#include "replay.h"
#include "trace.h"

namespace gapless::bench::testing {

// A trace node whose GPUs have used[i] milli taken (1000: held whole, by pods of `whole_set`
// GPUs each) and `cpu_used` of its CPU.
inline model::Node node_with(const std::string& name, std::int64_t cpu, int gpus,
                             const std::vector<int>& used, std::int64_t cpu_used = 0,
                             const std::string& gpu_model = "T4", int whole_set = 1) {
  model::Node n = to_node({name, cpu, 1 << 20, gpus, gpu_model});
  int whole_gpus = 0;
  for (std::size_t i = 0; i < used.size(); ++i) {
    model::GpuUsage& u = n.gpus[i].used;
    if (used[i] >= 1000) {
      u.whole = true;
      ++whole_gpus;
    } else if (used[i] > 0) {
      u.shared_pods = 1;
      u.compute_used_milli = used[i];
    }
  }
  if (whole_gpus > 0) n.whole_pods[whole_set] = whole_gpus / whole_set;
  n.host_used.cpu_milli = cpu_used;
  return n;
}

inline model::GpuRequest share(int milli, std::int64_t cpu = 0,
                               std::vector<std::string> models = {}) {
  return to_request({"p", cpu, 0, 1, milli, std::move(models)});
}
inline model::GpuRequest whole(int gpus, std::int64_t cpu = 0) {
  return to_request({"p", cpu, 0, gpus, 1000, {}});
}
inline model::GpuRequest cpu_only(std::int64_t cpu) {
  return to_request({"p", cpu, 0, 0, 0, {}});
}

// A trace pod for the dynamic replays: `gpus` GPUs of `milli` each (a share when one GPU and
// milli < 1000), created at `created`, living `life` seconds.
inline TracePod timed(const std::string& name, int gpus, int milli, std::int64_t created,
                      std::int64_t life, std::int64_t cpu = 1000) {
  TracePod p{name, cpu, 1024, gpus, gpus == 0 ? 0 : milli, {}};
  p.creation_time = created;
  p.deletion_time = created + life;
  return p;
}

// The drain scenario of the dynamic replays: two 2-GPU nodes. L1 and L2 hold one node for good;
// S1 and S2 fill the other until 11 and 21. B (2 GPUs, 5 s) arrives at 2 and W (1 GPU, 100 s) at
// 3; when S1 leaves at 11, W takes its GPU unless a drain target holds that node for B.
struct DrainScenario {
  std::vector<model::Node> nodes;
  Workload workload;
};
inline DrainScenario drain_scenario() {
  return {{to_node({"a", 64000, 1 << 20, 2, "T4"}), to_node({"b", 64000, 1 << 20, 2, "T4"})},
          prepare_workload("drain", {timed("L1", 1, 1000, 0, 1000), timed("L2", 1, 1000, 0, 1000),
                                     timed("S1", 1, 1000, 1, 10), timed("S2", 1, 1000, 1, 20),
                                     timed("B", 2, 1000, 2, 5), timed("W", 1, 1000, 3, 100)})};
}

// Consolidation's scenario: a and b, 4 GPUs each; spread puts big (3 GPUs) and small (1 GPU) on
// different nodes, and four then fits neither until big leaves at 100.
inline DrainScenario crowded_scenario() {
  return {{to_node({"a", 64000, 1 << 20, 4, "T4"}), to_node({"b", 64000, 1 << 20, 4, "T4"})},
          prepare_workload("micro", {timed("big", 3, 1000, 0, 100), timed("small", 1, 1000, 1, 100),
                                     timed("four", 4, 1000, 10, 5)})};
}

// The start of the pod named `name` in a dynamic run (-1: never placed), or -2 when the trace
// has no pod of that name.
inline double start_of(const Workload& w, const Arrivals& a, const DynamicRun& r,
                       const std::string& name) {
  for (std::size_t k = 0; k < a.order.size(); ++k) {
    if (w.pods[a.order[k]].name == name) return r.start[k];
  }
  return -2;
}

}  // namespace gapless::bench::testing
