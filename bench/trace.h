// The Alibaba GPU trace v2023 ("openb") as the bench reads it: node lists and pod lists in CSV
// (docs/packing-benchmark.md §1). Columns are found by name in the header, so the 11-column pod
// lists and the 5-column multigpu ones both load; extra columns are ignored. A malformed row is an
// error naming the file, the line and the column.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gapless/model/node.h"
#include "gapless/model/request.h"
#include "gapless/model/result.h"

namespace gapless::bench {

struct TraceNode {
  std::string name;  // sn
  std::int64_t cpu_milli = 0;
  std::int64_t memory_mib = 0;
  int gpus = 0;
  std::string model;
};

struct TracePod {
  std::string name;
  std::int64_t cpu_milli = 0;
  std::int64_t memory_mib = 0;
  int num_gpu = 0;
  int gpu_milli = 0;                  // per GPU; < 1000 only for single-GPU shares
  std::vector<std::string> gpu_spec;  // allowed models in file order ('|'-separated); empty: any
  // Seconds, from the creation_time and deletion_time columns; -1 where the list has none (the
  // 5-column multigpu lists). Only the dynamic replay reads them.
  std::int64_t creation_time = -1;
  std::int64_t deletion_time = -1;

  std::int64_t gpu_request() const { return static_cast<std::int64_t>(num_gpu) * gpu_milli; }
  bool has_times() const { return creation_time >= 0 && deletion_time >= creation_time; }
};

// `source` names the text in error messages ("<file>:<line>: ...").
Result<std::vector<TraceNode>> parse_nodes(const std::string& text, const std::string& source);
Result<std::vector<TracePod>> parse_pods(const std::string& text, const std::string& source);
Result<std::vector<TraceNode>> load_nodes(const std::string& path);
Result<std::vector<TracePod>> load_pods(const std::string& path);

// The engine's view of a trace node: GPUs of one model, no NVLink, CPU and memory tracked.
model::Node to_node(const TraceNode& n);
// The engine's view of a trace pod: a share (one GPU, gpu_milli < 1000) asks compute only; other
// GPU pods ask whole GPUs; pods without GPUs ask host resources only. CPU and memory always.
model::GpuRequest to_request(const TracePod& p);

// "openb_pod_list_default.csv" -> "default"; other names: the file name without ".csv".
std::string trace_name(const std::string& path);

}  // namespace gapless::bench
