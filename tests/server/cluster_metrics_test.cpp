// The cluster metrics computed at scrape time, against the demo cluster.
#include <regex>

#include "test_server.h"

namespace gapless::test {
namespace {

const std::string kH100 = "NVIDIA-H100-80GB-HBM3";

}  // namespace

TEST_CASE("metrics: every cluster metric is exported, per GPU model") {
  TestServer srv(demo_cluster());
  const std::string text = srv.get("/metrics").body;
  for (const char* name :
       {"gapless_cluster_gpu_fragment_milli", "gapless_cluster_gpu_stranded_milli",
        "gapless_cluster_shared_memory_stranded_bytes",
        "gapless_cluster_shared_compute_stranded_milli", "gapless_cluster_free_nodes",
        "gapless_cluster_gpu_capacity_gpus", "gapless_cluster_gpu_allocated_gpus",
        "gapless_cluster_shared_memory_capacity_bytes",
        "gapless_cluster_shared_memory_allocated_bytes",
        "gapless_cluster_shared_compute_capacity_milli",
        "gapless_cluster_shared_compute_allocated_milli", "gapless_cluster_mig_capacity_instances",
        "gapless_cluster_mig_allocated_instances", "gapless_node_largest_free_nvlink_set",
        "gapless_workload_mix_pods_observed", "gapless_workload_mix_age_seconds",
        "gapless_prioritize_score_margin", "gapless_waiting_pods",
        "gapless_drain_reserved_nodes"}) {
    INFO(name);
    CHECK_THAT(text, Catch::Contains(std::string("# TYPE ") + name + " "));
  }
  const std::string h100 = "{model=\"" + kH100 + "\"}";
  CHECK(metric_sample(text, "gapless_cluster_free_nodes" + h100) == 2);
  CHECK(metric_sample(text, "gapless_cluster_gpu_capacity_gpus" + h100) == 16);
  // Every demo node is counted once in the NVLink histogram; both NVSwitch H100s have 8 free.
  const std::size_t nodes = node_names(demo_cluster()).size();
  CHECK(metric_sample(text, "gapless_node_largest_free_nvlink_set_count") == nodes);
  CHECK(metric_sample(text, "gapless_node_largest_free_nvlink_set_bucket{le=\"7\"}") <= nodes - 2);
}

TEST_CASE("metrics: binding and prioritizing move the cluster metrics") {
  const std::vector<std::string> all = node_names(demo_cluster());
  TestServer srv(demo_cluster());
  const json pod = gpu_pod("two", "uid-metrics-1", 2);
  srv.call("/prioritize", extender_args(pod, all));
  REQUIRE(srv.filter_and_bind(pod, "h100-nvs-01") == "");
  const std::string text = srv.get("/metrics").body;
  const std::string h100 = "{model=\"" + kH100 + "\"}";
  CHECK(metric_sample(text, "gapless_cluster_free_nodes" + h100) == 1);
  CHECK(metric_sample(text, "gapless_cluster_gpu_allocated_gpus" + h100) == 2);
  CHECK(metric_sample(text, "gapless_workload_mix_pods_observed") == 1);
  CHECK(metric_sample(text, "gapless_prioritize_score_margin_count") == 1);
  // The mix learned one 2-GPU shape: the H100 node with 6 free GPUs fragments nothing for it.
  CHECK(metric_sample(text, "gapless_cluster_gpu_fragment_milli" + h100) == 0);
}

}  // namespace gapless::test
