#include <catch2/catch.hpp>
#include <string>

#include "gapless/k8s/allocation_record.h"

using gapless::k8s::decode_allocation_record;
using gapless::k8s::encode_allocation_record;
using gapless::k8s::gpushare_annotations;
using gapless::model::Allocation;
using gapless::model::GpuGrant;
using gapless::model::MigGrant;

namespace {

Allocation alloc(std::vector<GpuGrant> gpus, std::vector<MigGrant> mig = {}) {
  Allocation a;
  a.pod_uid = "uid-1";
  a.pod_ns = "ml";
  a.pod_name = "train-0";
  a.node = "n1";
  a.gpus = std::move(gpus);
  a.mig = std::move(mig);
  return a;
}

}  // namespace

TEST_CASE("allocation records round-trip", "[k8s][record]") {
  struct Case {
    const char* name;
    Allocation a;
    const char* text;
  };
  const Case cases[] = {
      {"whole", alloc({{0, "GPU-a"}, {3, "GPU-d"}}),
       R"({"v":1,"node":"n1","gpus":[{"index":0,"uuid":"GPU-a"},{"index":3,"uuid":"GPU-d"}]})"},
      {"shared", alloc({{2, "GPU-c", 8192, 500}}),
       R"({"v":1,"node":"n1","gpus":[{"index":2,"uuid":"GPU-c","memoryMiB":8192,"computeMilli":500}]})"},
      {"compute only", alloc({{1, "", 0, 250}}),
       R"({"v":1,"node":"n1","gpus":[{"index":1,"uuid":"","computeMilli":250}]})"},
      {"gpushare", alloc({{1, "", 0, 0, 3}}),
       R"({"v":1,"node":"n1","gpus":[{"index":1,"uuid":"","gpuMem":3}]})"},
      {"MIG placed", alloc({}, {{0, "1g.10gb", 3}, {2, "3g.40gb", 4}}),
       R"({"v":1,"node":"n1","gpus":[],"mig":[{"gpu":0,"profile":"1g.10gb","start":3},)"
       R"({"gpu":2,"profile":"3g.40gb","start":4}]})"},
      {"MIG pooled", alloc({}, {{-1, "1g.5gb", -1}, {-1, "1g.5gb", -1}}),
       R"({"v":1,"node":"n1","gpus":[],"mig":[{"profile":"1g.5gb"},{"profile":"1g.5gb"}]})"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const std::string text = encode_allocation_record(c.a);
    CHECK(text == c.text);
    auto back = decode_allocation_record(text, "ml", "train-0", "uid-1");
    REQUIRE(back.ok());
    CHECK(*back == c.a);
  }
}

TEST_CASE("decoding tolerates what other writers may add", "[k8s][record]") {
  auto a = decode_allocation_record(
      R"({"v": 1, "node": "n1", "pod": "ml/train-0", "gpus": [{"index": 4}], "mig": null})", "ml",
      "train-0", "uid-1");
  REQUIRE(a.ok());
  REQUIRE(a->gpus.size() == 1);
  CHECK(a->gpus[0].index == 4);
  CHECK(a->gpus[0].uuid.empty());
  CHECK(a->gpus[0].whole());
  CHECK(a->pod_uid == "uid-1");
  CHECK(a->pod_ns == "ml");
  CHECK(a->pod_name == "train-0");
}

TEST_CASE("bad allocation records are errors", "[k8s][record]") {
  struct Case {
    const char* text;
    const char* message;
  };
  const Case cases[] = {
      {"", "not valid JSON"},
      {"garbage", "not valid JSON"},
      {"[1]", "must be a JSON object"},
      {R"({"node":"n1","gpus":[{"index":0}]})", "v: unsupported version (missing), expected 1"},
      {R"({"v":2,"node":"n1","gpus":[{"index":0}]})", "v: unsupported version 2, expected 1"},
      {R"({"v":"1","node":"n1","gpus":[{"index":0}]})", "v: unsupported version \"1\", expected 1"},
      {R"({"v":1.0,"node":"n1","gpus":[{"index":0}]})", "v: unsupported version 1.0, expected 1"},
      {R"({"v":1,"gpus":[{"index":0}]})", "node: must be a non-empty string"},
      {R"({"v":1,"node":7,"gpus":[{"index":0}]})", "node: must be a non-empty string"},
      {R"({"v":1,"node":"","gpus":[{"index":0}]})", "node: must be a non-empty string"},
      {R"({"v":1,"node":"n1"})", "holds no GPU and no MIG instance"},
      {R"({"v":1,"node":"n1","gpus":{}})", "gpus: must be a list"},
      {R"({"v":1,"node":"n1","mig":"1g.5gb"})", "mig: must be a list"},
      {R"({"v":1,"node":"n1","gpus":[3]})", "gpus[0]: must be an object"},
      {R"({"v":1,"node":"n1","gpus":[{"uuid":"GPU-a"}]})", "gpus[0].index: missing"},
      {R"({"v":1,"node":"n1","gpus":[{"index":-1}]})",
       "gpus[0].index: must be an integer 0..2147483647, got -1"},
      {R"({"v":1,"node":"n1","gpus":[{"index":"0"}]})",
       "gpus[0].index: must be an integer 0..2147483647, got \"0\""},
      {R"({"v":1,"node":"n1","gpus":[{"index":0,"uuid":5}]})", "gpus[0].uuid: must be a string"},
      {R"({"v":1,"node":"n1","gpus":[{"index":0,"memoryMiB":-5}]})",
       "gpus[0].memoryMiB: must be an integer 0..9007199254740992, got -5"},
      {R"({"v":1,"node":"n1","gpus":[{"index":0,"computeMilli":1001}]})",
       "gpus[0].computeMilli: must be an integer 0..1000, got 1001"},
      {R"({"v":1,"node":"n1","gpus":[{"index":0,"gpuMem":2.5}]})",
       "gpus[0].gpuMem: must be an integer 0..9007199254740992, got 2.5"},
      {R"({"v":1,"node":"n1","gpus":[{"index":0,"gpuMem":2,"memoryMiB":10}]})",
       "gpus[0]: gpuMem cannot be combined with memoryMiB or computeMilli"},
      {R"({"v":1,"node":"n1","gpus":[{"index":1},{"index":1}]})",
       "gpus[1].index: GPU 1 listed twice"},
      {R"({"v":1,"node":"n1","mig":[{"gpu":0,"start":0}]})",
       "mig[0].profile: must be a non-empty string"},
      {R"({"v":1,"node":"n1","mig":[{"gpu":0,"profile":"1g.5gb"}]})",
       "mig[0]: gpu and start must be given together"},
      {R"({"v":1,"node":"n1","mig":[{"gpu":-1,"profile":"1g.5gb","start":-1}]})",
       "mig[0].gpu: must be an integer 0..2147483647, got -1"},
      {R"({"v":1,"node":"n1","mig":[{"gpu":0,"profile":"1g.5gb","start":8}]})",
       "mig[0].start: must be an integer 0..7, got 8"},
      {R"({"v":1,"node":"n1","gpus":[{"index":0}],"mig":[{"profile":"1g.5gb"}]})",
       "holds both GPUs and MIG instances (a pod asks for one kind)"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    auto r = decode_allocation_record(c.text, "ml", "p", "u");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error() == std::string("gapless.io/allocation: ") + c.message);
  }
}

// Messages quote bad values, and dumping a value recursed once per level: a record of 100k
// brackets overflowed the stack (fuzz/regressions/allocation_record/).
TEST_CASE("deeply nested records are refused before parsing", "[k8s][record]") {
  const std::string deep = R"({"v":)" + std::string(100000, '[') + std::string(100000, ']') +
                           R"(,"node":"n1","gpus":[{"index":0}]})";
  auto r = decode_allocation_record(deep, "ml", "p", "u");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error() == "gapless.io/allocation: nested deeper than 512 levels");
  // 512 levels are fine (and then just a wrong version).
  const std::string ok = R"({"v":)" + std::string(511, '[') + std::string(511, ']') +
                         R"(,"node":"n1","gpus":[{"index":0}]})";
  auto at_limit = decode_allocation_record(ok, "ml", "p", "u");
  REQUIRE_FALSE(at_limit.ok());
  CHECK_THAT(at_limit.error(), Catch::StartsWith("gapless.io/allocation: v: unsupported version"));
  // Brackets inside strings do not count.
  const std::string in_string =
      R"({"v":1,"node":")" + std::string(1000, '[') + R"(\"{",)" + R"("gpus":[{"index":0}]})";
  CHECK(decode_allocation_record(in_string, "ml", "p", "u").ok());
}

TEST_CASE("gpushare annotations for gpushare's device plugin", "[k8s][record]") {
  gapless::model::Node node;
  node.name = "share-01";
  node.gpus.resize(2);
  for (int i = 0; i < 2; ++i) {
    node.gpus[i].index = i;
    node.gpus[i].gpushare_capacity = 15;
  }

  auto ann = gpushare_annotations(alloc({{1, "", 0, 0, 3}}), node, 1736931000123456789);
  CHECK(ann == std::map<std::string, std::string>{
                   {"ALIYUN_COM_GPU_MEM_IDX", "1"},
                   {"ALIYUN_COM_GPU_MEM_POD", "3"},
                   {"ALIYUN_COM_GPU_MEM_DEV", "15"},
                   {"ALIYUN_COM_GPU_MEM_ASSIGNED", "false"},
                   {"ALIYUN_COM_GPU_MEM_ASSUME_TIME", "1736931000123456789"},
               });

  CHECK(gpushare_annotations(alloc({{0, "GPU-a"}}), node, 1).empty());
  CHECK(gpushare_annotations(alloc({{0, "", 4096, 0}}), node, 1).empty());
  CHECK(gpushare_annotations(alloc({}, {{0, "1g.5gb", 0}}), node, 1).empty());
  CHECK(gpushare_annotations(alloc({{5, "", 0, 0, 3}}), node, 1).empty());  // no such GPU
}

TEST_CASE("with its node, a record names each placed MIG entry's GPU by UUID too",
          "[k8s][record]") {
  gapless::model::Node node;
  node.gpus.resize(2);
  node.gpus[1].index = 1;
  node.gpus[1].uuid = "GPU-b";
  const Allocation a = alloc({}, {{1, "1g.10gb", 6}, {-1, "1g.10gb", -1}});
  CHECK(encode_allocation_record(a, &node) ==
        R"({"v":1,"node":"n1","gpus":[],"mig":[{"gpu":1,"profile":"1g.10gb","start":6,)"
        R"("uuid":"GPU-b"},{"profile":"1g.10gb"}]})");
  CHECK(encode_allocation_record(a).find("uuid") == std::string::npos);  // without it, as before
  // The UUID is for the node's device plugin; the record decodes the same either way.
  auto back =
      decode_allocation_record(encode_allocation_record(a, &node), "ml", "train-0", "uid-1");
  REQUIRE(back.ok());
  CHECK(back->mig == a.mig);
}
