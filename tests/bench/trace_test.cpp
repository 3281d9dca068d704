// The trace CSV loader: both pod-list layouts, the engine views of rows, and malformed rows
// reported with file and line.
#include <catch2/catch.hpp>

#include <string>

#include "test_paths.h"
#include "trace.h"

using namespace gapless;
using namespace gapless::bench;

namespace {
const std::string kFixtures = gapless::test::source_dir() + "/tests/fixtures/bench/";
const std::string kPodHeader =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n";
}  // namespace

TEST_CASE("node and pod lists load from the fixtures", "[bench][trace]") {
  auto nodes = load_nodes(kFixtures + "nodes.csv");
  REQUIRE(nodes.ok());
  REQUIRE(nodes->size() == 24);
  CHECK(nodes->front().name == "openb-node-0000");
  CHECK(nodes->front().cpu_milli == 64000);
  CHECK(nodes->front().memory_mib == 262144);
  CHECK(nodes->front().gpus == 2);
  CHECK(nodes->front().model == "P100");

  auto pods = load_pods(kFixtures + "pods.csv");  // 11 columns, with gpu_spec
  REQUIRE(pods.ok());
  REQUIRE(pods->size() == 160);
  CHECK(pods->front().name == "openb-pod-0000");
  CHECK(pods->front().num_gpu == 1);
  CHECK(pods->front().gpu_milli == 1000);
  int constrained = 0;
  for (const TracePod& p : *pods) constrained += !p.gpu_spec.empty();
  CHECK(constrained == 51);

  auto multi = load_pods(kFixtures + "pods_multigpu.csv");  // 5 columns
  REQUIRE(multi.ok());
  REQUIRE(multi->size() == 61);
  CHECK(multi->back().num_gpu == 8);
  CHECK(multi->back().gpu_request() == 8000);
}

TEST_CASE("gpu_spec keeps the listed models in order, duplicates included", "[bench][trace]") {
  auto pods = parse_pods(kPodHeader +
                             "p,1000,0,1,500,V100M16|V100M32|V100M32,LS,Running,0,1,0\n"
                             "q,1000,0,0,0,,LS,Running,0,1,0\n",
                         "x.csv");
  REQUIRE(pods.ok());
  CHECK((*pods)[0].gpu_spec == std::vector<std::string>{"V100M16", "V100M32", "V100M32"});
  CHECK((*pods)[1].gpu_spec.empty());
}

TEST_CASE("creation and deletion times load where the list has them", "[bench][trace]") {
  auto pods = parse_pods(
      kPodHeader + "p,1000,0,1,500,,LS,Running,10,70,12\n" + "q,1000,0,0,0,,LS,Pending,20,20,\n",
      "x.csv");
  REQUIRE(pods.ok());
  CHECK((*pods)[0].creation_time == 10);
  CHECK((*pods)[0].deletion_time == 70);
  CHECK((*pods)[0].has_times());
  CHECK((*pods)[1].has_times());  // a zero lifetime is allowed

  auto five = parse_pods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,1000,0,1,500\n", "m.csv");
  REQUIRE(five.ok());
  CHECK((*five)[0].creation_time == -1);
  CHECK_FALSE((*five)[0].has_times());

  auto backwards = parse_pods(kPodHeader + "p,1000,0,1,500,,LS,Running,70,10,70\n", "x.csv");
  REQUIRE_FALSE(backwards.ok());
  CHECK(backwards.error() == "x.csv:2: deletion_time 10 is before creation_time 70");
  auto blank = parse_pods(kPodHeader + "p,1000,0,1,500,,LS,Running,,10,\n", "x.csv");
  REQUIRE_FALSE(blank.ok());
  CHECK(blank.error() == "x.csv:2: column creation_time: expected an integer, got \"\"");
}

TEST_CASE("trace rows become engine nodes and requests", "[bench][trace]") {
  const model::Node n = to_node({"n1", 96000, 393216, 8, "G2"});
  CHECK(n.name == "n1");
  REQUIRE(n.gpus.size() == 8);
  CHECK(n.gpus[7].index == 7);
  CHECK(n.gpus[0].model == "G2");
  CHECK(n.links.size() == 8);
  CHECK(n.host == model::HostResources{96000, 393216});

  TracePod share{"s", 4000, 1024, 1, 470, {"T4"}};
  const model::GpuRequest s = to_request(share);
  CHECK(s.kind == model::RequestKind::kShared);
  CHECK(s.shared.compute_milli == 470);
  CHECK(s.shared.memory_mib == 0);
  CHECK(s.shared.count == 1);
  CHECK(s.models == std::vector<std::string>{"T4"});
  CHECK(s.host == model::HostResources{4000, 1024});

  const model::GpuRequest one = to_request({"w", 8000, 0, 1, 1000, {}});
  CHECK(one.kind == model::RequestKind::kWhole);
  CHECK(one.whole == 1);
  const model::GpuRequest four = to_request({"w4", 8000, 0, 4, 1000, {}});
  CHECK(four.kind == model::RequestKind::kWhole);
  CHECK(four.whole == 4);
  CHECK(four.topology == model::TopologyWish::kNone);
  const model::GpuRequest cpu = to_request({"c", 2000, 4096, 0, 0, {}});
  CHECK(cpu.kind == model::RequestKind::kNone);
  CHECK(cpu.host == model::HostResources{2000, 4096});
}

TEST_CASE("trace names come from the file name", "[bench][trace]") {
  CHECK(trace_name("/a/b/openb_pod_list_default.csv") == "default");
  CHECK(trace_name("openb_pod_list_multigpu50.csv") == "multigpu50");
  CHECK(trace_name("mine.csv") == "mine");
}

TEST_CASE("malformed rows name the file, the line and the column", "[bench][trace]") {
  struct Case {
    std::string text;
    std::string error;
  };
  const std::string h = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n";
  const std::vector<Case> cases = {
      {"", "pods.csv:1: empty file; expected a header row"},
      {"name,cpu_milli,num_gpu,gpu_milli\n", "pods.csv:1: header lacks column \"memory_mib\""},
      {h + "a,1000,0,1,500\nb,1000,0,1\n", "pods.csv:3: expected 5 fields, got 4"},
      {h + "a,1k,0,1,500\n", "pods.csv:2: column cpu_milli: expected an integer, got \"1k\""},
      {h + "a,,0,1,500\n", "pods.csv:2: column cpu_milli: expected an integer, got \"\""},
      {h + "a,1000,0,1,1500\n", "pods.csv:2: column gpu_milli: 1500 is outside 0..1000"},
      {h + "a,1000,-5,1,500\n", "pods.csv:2: column memory_mib: -5 is outside 0..1099511627776"},
      {h + "a,1000,0,2,500\n", "pods.csv:2: a share (gpu_milli 500) spans one GPU, not 2"},
      {h + "a,1000,0,1,0\n",
       "pods.csv:2: num_gpu 1 with gpu_milli 0: a pod asks GPUs in both columns or in neither"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    auto pods = parse_pods(c.text, "pods.csv");
    REQUIRE_FALSE(pods.ok());
    CHECK(pods.error() == c.error);
  }
  auto nodes = parse_nodes("sn,cpu_milli,memory_mib,gpu,model\nn1,96000,1024,9x,G2\n", "n.csv");
  REQUIRE_FALSE(nodes.ok());
  CHECK(nodes.error() == "n.csv:2: column gpu: expected an integer, got \"9x\"");
  auto empty_name = parse_nodes("sn,cpu_milli,memory_mib,gpu,model\n,96000,1024,8,G2\n", "n.csv");
  REQUIRE_FALSE(empty_name.ok());
  CHECK(empty_name.error() == "n.csv:2: column sn: empty node name");
}

TEST_CASE("CRLF line ends and trailing blank lines are accepted", "[bench][trace]") {
  auto pods =
      parse_pods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\r\na,1000,0,1,500\r\n\r\n", "w.csv");
  REQUIRE(pods.ok());
  REQUIRE(pods->size() == 1);
  CHECK((*pods)[0].gpu_milli == 500);
}

TEST_CASE("a missing file is an error naming it", "[bench][trace]") {
  auto pods = load_pods("/nonexistent/pods.csv");
  REQUIRE_FALSE(pods.ok());
  CHECK(pods.error() == "/nonexistent/pods.csv: cannot read");
}
