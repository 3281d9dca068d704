// The agent's nvidia.com/gpu.product label (product_label.h) against the fake API server: written
// where absent, kept up to date where the agent wrote it, never over GPU Feature Discovery's.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "fake_api_server.h"
#include "gapless/agent/product_label.h"

namespace {

using namespace gapless;
using nlohmann::json;

std::vector<agent::GpuState> gpus_of(const std::vector<std::string>& models) {
  std::vector<agent::GpuState> out;
  for (std::size_t i = 0; i < models.size(); ++i) {
    agent::GpuState g;
    g.index = static_cast<int>(i);
    g.model = models[i];
    out.push_back(g);
  }
  return out;
}

struct Rig {
  explicit Rig(json metadata = json::object()) {
    metadata["name"] = "gpu-1";
    api.add_node({{"metadata", metadata}});
  }
  std::string label() const { return value_of("labels", agent::kProductLabel); }
  std::string owner() const { return value_of("annotations", agent::kProductLabelOwner); }
  std::size_t patches() const { return api.count_requests("PATCH", "/api/v1/nodes/gpu-1"); }
  std::string value_of(const char* section, const char* key) const {
    const auto n = api.node("gpu-1");
    REQUIRE(n);
    const json& meta = (*n)["metadata"];
    if (!meta.contains(section) || !meta[section].contains(key)) return "(none)";
    return meta[section][key].get<std::string>();
  }
  test::FakeApiServer api;
  k8s::ApiClient client{api.client_config()};
  agent::ProductLabeler labeler{client, "gpu-1"};
};

const std::string kA100 = "NVIDIA-A100-SXM4-80GB";
const std::string kH100 = "NVIDIA-H100-80GB-HBM3";

}  // namespace

TEST_CASE("the product label value is the model most GPUs have, GFD's spelling", "[productlabel]") {
  CHECK(agent::product_label_value(gpus_of({kA100, kA100})) == kA100);
  CHECK(agent::product_label_value(gpus_of({kH100, kA100, kA100})) == kA100);
  // A tie goes to the lowest-indexed GPU's model (GFD labels GPU 0's).
  CHECK(agent::product_label_value(gpus_of({kH100, kA100, kA100, kH100})) == kH100);
  CHECK(agent::product_label_value({}) == "");
  // Not a label value (over 63 characters, or not alphanumeric at the end): no label.
  CHECK(agent::product_label_value(gpus_of({std::string(64, 'A')})) == "");
  CHECK(agent::product_label_value(gpus_of({"NVIDIA-X-"})) == "");
}

TEST_CASE("the agent labels a node without the label and keeps its own label current",
          "[productlabel]") {
  Rig rig(json{{"labels", {{"keep", "me"}}}});
  auto first = rig.labeler.publish(kA100);
  REQUIRE(first.ok());
  CHECK(*first);
  CHECK(rig.label() == kA100);
  CHECK(rig.owner() == kA100);  // the record that the agent owns it
  CHECK(rig.value_of("labels", "keep") == "me");

  auto same = rig.labeler.publish(kA100);  // unchanged: not even a read
  REQUIRE(same.ok());
  CHECK_FALSE(*same);
  CHECK(rig.api.count_requests("GET", "/api/v1/nodes/gpu-1") == 1);

  auto changed = rig.labeler.publish(kH100);  // e.g. the GPUs were replaced
  REQUIRE(changed.ok());
  CHECK(*changed);
  CHECK(rig.label() == kH100);
  CHECK(rig.owner() == kH100);

  SECTION("a restarted agent with the same GPUs writes nothing") {
    agent::ProductLabeler restarted(rig.client, "gpu-1");
    auto again = restarted.publish(kH100);
    REQUIRE(again.ok());
    CHECK_FALSE(*again);
    CHECK(rig.patches() == 2);
  }
  SECTION("GPU Feature Discovery overwrote it: the agent leaves it and gives up ownership") {
    rig.api.update_node("gpu-1",
                        [](json& n) { n["metadata"]["labels"][agent::kProductLabel] = "X"; });
    auto after = rig.labeler.publish(kA100);
    REQUIRE(after.ok());
    CHECK(rig.label() == "X");
    CHECK(rig.owner() == "(none)");
  }
}

TEST_CASE("the agent never overwrites a product label it did not write", "[productlabel]") {
  SECTION("set by GPU Feature Discovery") {
    Rig rig(json{{"labels", {{agent::kProductLabel, "Tesla-V100-SXM2-16GB"}}}});
    auto r = rig.labeler.publish(kA100);
    REQUIRE(r.ok());
    CHECK_FALSE(*r);
    CHECK(rig.label() == "Tesla-V100-SXM2-16GB");
    CHECK(rig.owner() == "(none)");
    CHECK(rig.patches() == 0);
  }
  SECTION("managed by Node Feature Discovery, even while absent") {
    Rig rig(json{{"annotations",
                  {{agent::kNfdFeatureLabels, "nvidia.com/gpu.count,nvidia.com/gpu.product"}}}});
    auto r = rig.labeler.publish(kA100);
    REQUIRE(r.ok());
    CHECK(rig.label() == "(none)");
    CHECK(rig.patches() == 0);
  }
}

TEST_CASE("a failed or conflicting label patch is tried again at the next scan", "[productlabel]") {
  Rig rig;
  rig.api.fail_next("PATCH", "/api/v1/nodes/gpu-1", 1, 409, "the object has been modified");
  auto failed = rig.labeler.publish(kA100);
  REQUIRE_FALSE(failed.ok());
  CHECK_THAT(failed.error(), Catch::Contains("409"));
  CHECK(rig.label() == "(none)");
  auto retried = rig.labeler.publish(kA100);
  REQUIRE(retried.ok());
  CHECK(*retried);
  CHECK(rig.label() == kA100);
}

TEST_CASE("the fake API server holds a merge patch to the resourceVersion it names",
          "[productlabel]") {
  Rig rig;
  const std::string rv = (*rig.api.node("gpu-1"))["metadata"]["resourceVersion"].get<std::string>();
  rig.api.update_node("gpu-1", [](json& n) { n["metadata"]["labels"]["other"] = "write"; });
  auto stale = rig.client.call(
      "PATCH", "/api/v1/nodes/gpu-1",
      json{{"metadata", {{"resourceVersion", rv}, {"labels", {{"a", "b"}}}}}}.dump(),
      "application/merge-patch+json");
  REQUIRE(stale.ok());
  CHECK(stale->status == 409);
  CHECK(rig.value_of("labels", "a") == "(none)");
}
