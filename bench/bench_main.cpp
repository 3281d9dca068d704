// gapless-bench: replays the Alibaba GPU trace v2023 through the placement engine and compares
// with the FGD paper's published numbers (docs/packing-benchmark.md).
//
//   gapless-bench --nodes NODE_CSV --pods POD_CSV [--pods ...] --policy P [--policy ...]
//                 --seeds 42-51 [--json] [--markdown FILE] [--curves DIR]
//                 [--dynamic [--speedup K] [--max-wait S] [--least-waits]]
//                 [--scheduler-config FILE]
//                 [--models-as-node-affinity]
//
// P is a strategy name (random, dotprod, clustering, packing, bestfit, fgd, ...) or a policy YAML
// file. Runs (trace x policy x seed) are spread over --threads workers. --dynamic replays the
// creation and deletion times instead (replay.h), with a pending queue.
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "gapless/placement/strategy.h"
#include "gapless/policy/loader.h"
#include "limit_report.h"
#include "report.h"
#include "sweep.h"

using namespace gapless;

namespace {

Result<std::vector<int>> parse_seeds(const std::string& text) {
  std::vector<int> seeds;
  std::stringstream in(text);
  std::string part;
  try {
    while (std::getline(in, part, ',')) {
      const auto dash = part.find('-', 1);
      const int lo = std::stoi(part.substr(0, dash));
      const int hi = dash == std::string::npos ? lo : std::stoi(part.substr(dash + 1));
      if (hi < lo || hi - lo > 100000) return Error{"--seeds: bad range \"" + part + "\""};
      for (int s = lo; s <= hi; ++s) seeds.push_back(s);
    }
  } catch (const std::exception&) {
    return Error{"--seeds: expected A-B or A,B,..., got \"" + text + "\""};
  }
  if (seeds.empty()) return Error{"--seeds: no seeds"};
  return seeds;
}

Result<bench::PolicySetup> resolve_policy(const std::string& p, bool oracle_for_all) {
  bench::PolicySetup setup;
  setup.label = p;
  if (const placement::Strategy* s = placement::find_strategy(p)) {
    // The paper's setup: this one strategy decides both the node and the GPUs.
    setup.profile.name = p;
    setup.profile.node = {{s, 1.0}};
    setup.profile.gpu = {{s, 1.0}};
    setup.profile.gpu_weight = 0;
    setup.profile.topology_weight = 0;
    setup.oracle_mix = oracle_for_all || p == "fgd";  // FGD as published: the oracle mix
    return setup;
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(p, ec)) {
    std::string known;
    for (auto n : placement::strategy_names())
      known += (known.empty() ? "" : ", ") + std::string(n);
    return Error{"--policy " + p + ": neither a strategy (" + known + ") nor a policy file"};
  }
  auto policy = policy::load_policy_file(p);
  if (!policy) return Error{policy.error()};
  std::string err;
  const placement::Profile* profile = placement::select_profile(*policy, model::PodInfo{}, &err);
  if (profile == nullptr) return Error{p + ": " + err};
  setup.profile = *profile;
  setup.oracle_mix = oracle_for_all;
  return setup;
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) std::cerr << "gapless-bench: cannot write " << path << "\n";
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gapless-bench: replay the Alibaba GPU trace v2023 through the Gapless engine"};
  std::string nodes_path, seeds_text = "42-51", markdown_path, curves_dir, published_path;
  std::vector<std::string> pod_paths, policy_names;
  bool json = false, quiet = false, oracle = false, dynamic = false, no_unschedulable = false;
  bool models_as_node_affinity = false, no_limit = false;
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  double tune = 1.3;
  bench::DynamicOptions dyn;
  std::string scheduler_config, extender_url, write_cluster;
  app.add_option("--nodes", nodes_path, "node list CSV")->required();
  app.add_option("--pods", pod_paths, "pod list CSV (repeatable)")->required()->take_last();
  app.add_option("--policy", policy_names,
                 "strategy name or policy YAML (repeatable); none: only the limit");
  app.add_option("--seeds", seeds_text, "seeds: A-B or A,B,... (default 42-51)");
  app.add_flag("--json", json, "one JSON object per trace x policy on stdout");
  app.add_option("--markdown", markdown_path, "also write the results table to this file");
  app.add_option("--curves", curves_dir, "write CSV curves (trace_policy.csv) into this folder");
  app.add_option("--published", published_path,
                 "the FGD paper's summary_by_trace_policy.csv (default: next to the node list)");
  app.add_option("--threads", threads, "parallel runs (default: all cores)");
  app.add_option("--tune", tune, "arrived GPU request as a multiple of capacity (default 1.3)");
  app.add_flag("--oracle-mix", oracle, "every policy scores against the trace's typical pods");
  app.add_flag("--quiet", quiet, "no progress on stderr");
  app.add_flag("--no-limit", no_limit,
               "skip the limit: the LP's lower bound on unallocated GPU % and the offline packing");
  app.add_flag(
      "--dynamic", dynamic,
      "replay creation/deletion times with a pending queue (our mode, no published anchor)");
  app.add_option("--speedup", dyn.speedup,
                 "--dynamic: arrivals at creation_time / K; lifetimes unscaled (default 1)")
      ->check(CLI::PositiveNumber);
  app.add_option("--max-wait", dyn.max_wait,
                 "--dynamic: a pod waiting longer than S seconds gives up (default 0: never)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--least-waits", dyn.least_waits,
               "--dynamic, in-process: also the least the longest-waiting multi-GPU pod could have "
               "waited once it arrived (multi_gpu_longest_bound_s; slower)");
  app.add_option("--movable", dyn.movable,
                 "--dynamic: this fraction of the pods (0-1, drawn per seed) is "
                 "movable and consolidation moves them for waiting multi-GPU pods (default 0: off)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--max-moves", dyn.max_moves,
                 "--movable: evictions one plan may make (1-8; default: the policy's "
                 "consolidation.maxMovesPerPlan, 3)")
      ->check(CLI::Range(1, 8));
  app.add_option("--scheduler-config", scheduler_config,
                 "as-deployed mode: replay through kube-scheduler configured by this "
                 "KubeSchedulerConfiguration (e.g. manifests/scheduler-config.yaml)");
  app.add_option("--extender", extender_url,
                 "with --scheduler-config: call a live gapless-extender at this URL instead of "
                 "the engine in-process (one trace, one policy, one seed)");
  app.add_flag("--no-unschedulable", no_unschedulable,
               "--dynamic with --scheduler-config: the extender learns of waiting pods only from "
               "its own filter, not from their Unschedulable condition (what that path is worth)");
  app.add_flag("--models-as-node-affinity", models_as_node_affinity,
               "with --scheduler-config: pods naming GPU models also require them as a "
               "nodeAffinity on nvidia.com/gpu.product, which kube-scheduler's sample respects");
  app.add_option("--write-cluster", write_cluster,
                 "write the node list as a NodeList for gapless-extender --cluster, and exit");
  for (auto* opt : {app.get_option("--pods"), app.get_option("--policy")})
    opt->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  CLI11_PARSE(app, argc, argv);

  if (policy_names.empty() && (no_limit || dynamic || !scheduler_config.empty())) {
    return std::cerr << "gapless-bench: --policy is needed unless only the limit is asked for\n", 2;
  }
  auto seeds = parse_seeds(seeds_text);
  if (!seeds) return std::cerr << "gapless-bench: " << seeds.error() << "\n", 2;
  bench::SweepInput in;
  in.seeds = *seeds;
  in.tune = tune;
  for (const std::string& p : policy_names) {
    auto setup = resolve_policy(p, oracle);
    if (!setup) return std::cerr << "gapless-bench: " << setup.error() << "\n", 2;
    in.policies.push_back(std::move(*setup));
  }
  if (auto err = bench::load_inputs(nodes_path, pod_paths, &in); !err.empty()) {
    return std::cerr << "gapless-bench: " << err << "\n", 1;
  }
  if (!write_cluster.empty()) {
    return write_file(write_cluster, bench::cluster_file_json(in.nodes)) ? 0 : 1;
  }
  if (!scheduler_config.empty()) {
    auto config = bench::load_scheduler_config(scheduler_config);
    if (!config) return std::cerr << "gapless-bench: " << config.error() << "\n", 2;
    in.deployed = std::move(*config);
    in.deployed->models_as_node_affinity = models_as_node_affinity;
    in.extender_url = extender_url;
    if (!extender_url.empty() &&
        (in.workloads.size() != 1 || in.policies.size() != 1 || in.seeds.size() != 1)) {
      return std::cerr << "gapless-bench: --extender replays one trace, one policy and one "
                          "seed against a freshly started extender\n",
             2;
    }
  } else if (!extender_url.empty()) {
    return std::cerr << "gapless-bench: --extender needs --scheduler-config\n", 2;
  } else if (models_as_node_affinity) {
    return std::cerr << "gapless-bench: --models-as-node-affinity needs --scheduler-config\n", 2;
  }
  if (dynamic && !extender_url.empty()) {
    // A live extender cannot be reset between runs, and a --cluster one has no pod informer to
    // see pods leave: the dynamic replay as deployed runs the extender in-process only.
    return std::cerr << "gapless-bench: --dynamic does not run against --extender; use "
                        "--scheduler-config alone (the extender in-process)\n",
           2;
  }
  if (dyn.movable > 0 && !dynamic) {
    return std::cerr << "gapless-bench: --movable needs --dynamic\n", 2;
  }
  if (no_unschedulable && (!dynamic || !in.deployed)) {
    return std::cerr << "gapless-bench: --no-unschedulable needs --dynamic and "
                        "--scheduler-config\n",
           2;
  }
  if (published_path.empty()) {
    const auto guess = std::filesystem::path(nodes_path).parent_path() /
                       "fgd-atc23-expected-results" / "summary_by_trace_policy.csv";
    if (std::filesystem::exists(guess)) published_path = guess.string();
  }
  bench::PublishedTable published;
  if (!published_path.empty()) {
    auto table = bench::load_published(published_path);
    if (!table) return std::cerr << "gapless-bench: " << table.error() << "\n", 1;
    published = std::move(*table);
  }

  const bool tty = isatty(STDERR_FILENO);
  if (dynamic) {
    for (const bench::Workload& w : in.workloads) {
      for (const bench::TracePod& p : w.pods) {
        if (p.has_times()) continue;
        return std::cerr << "gapless-bench: --dynamic: trace " << w.name << " (pod " << p.name
                         << ") has no creation_time/deletion_time columns\n",
               1;
      }
    }
    bench::DynamicRunner runner;
    if (in.deployed) {
      runner = [&](const std::vector<model::Node>& nodes, const bench::Workload& w,
                   const bench::Arrivals& a, const bench::PolicySetup& policy, std::uint64_t seed,
                   const bench::DynamicOptions& options) {
        auto port = bench::in_process_extender(nodes, bench::with_consolidation(policy, options));
        return bench::replay_dynamic_deployed(nodes, w, a, *in.deployed, *port, seed, options,
                                              !no_unschedulable);
      };
    }
    std::vector<bench::DynamicCell> cells =
        bench::run_dynamic_sweep(in.nodes, in.workloads, in.policies, in.seeds, dyn, threads,
                                 quiet ? bench::Progress{} : bench::stderr_progress(tty), runner);
    if (in.deployed) {
      for (bench::DynamicCell& c : cells)
        c.deployed_waits = no_unschedulable ? "filter" : "filter+unschedulable";
    }
    if (json) {
      for (const bench::DynamicCell& c : cells)
        std::cout << bench::dynamic_json_line(c, dyn) << "\n";
    }
    const std::string table = bench::dynamic_markdown_table(cells, dyn);
    if (!json) std::cout << table;
    if (!markdown_path.empty() && !write_file(markdown_path, table)) return 1;
    if (!curves_dir.empty()) {
      std::filesystem::create_directories(curves_dir);
      for (const bench::DynamicCell& c : cells) {
        const auto file = std::filesystem::path(curves_dir) /
                          (c.trace + "_" + bench::policy_column(c.policy) + "_dynamic.csv");
        if (!write_file(file.string(), bench::dynamic_curve_csv(c, dyn))) return 1;
      }
    }
    return 0;
  }
  const std::vector<bench::Cell> cells =
      bench::run_sweep(in, threads, quiet ? bench::Progress{} : bench::stderr_progress(tty));
  std::vector<bench::LimitCell> limits;
  if (!no_limit) {
    limits =
        bench::run_limits(in, threads, quiet ? bench::Progress{} : bench::stderr_progress(tty));
  }

  for (const bench::Cell& c : cells) {
    const std::string strategy = c.policy;
    auto pub = published.find({c.trace, strategy});
    if (json)
      std::cout << bench::json_line(c, pub == published.end() ? nullptr : &pub->second) << "\n";
  }
  if (json) {
    for (const bench::LimitCell& l : limits) std::cout << bench::limit_json_lines(l) << "\n";
  }
  const std::string table = bench::markdown_table(cells, published, limits);
  if (!json) std::cout << table;
  if (!markdown_path.empty() && !write_file(markdown_path, table)) return 1;
  if (!curves_dir.empty()) {
    std::filesystem::create_directories(curves_dir);
    for (const bench::Cell& c : cells) {
      const auto file = std::filesystem::path(curves_dir) /
                        (c.trace + "_" + bench::policy_column(c.policy) + ".csv");
      if (!write_file(file.string(), bench::curve_csv(c))) return 1;
    }
  }
  return 0;
}
