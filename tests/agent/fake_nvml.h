// Test helpers for the agent suites: the fake NVML (tests/fake_nvml/) configured from a fixture
// of tests/fixtures/nvml/, and the topology fixtures the agent's output is compared with.
#pragma once

#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "gapless/agent/nvml_library.h"
#include "gapless/k8s/node_inventory.h"
#include "test_paths.h"

namespace gapless::test {

inline std::string nvml_fixture(const std::string& name) {
  return gapless::test::source_dir() + "/tests/fixtures/nvml/" + name + ".json";
}

// Points the fake at `config` (and `events`, "" for none) for the next nvmlInit_v2.
inline void configure_fake_nvml(const std::string& config, const std::string& events = "") {
  setenv("GAPLESS_FAKE_NVML_CONFIG", config.c_str(), 1);
  if (events.empty()) {
    unsetenv("GAPLESS_FAKE_NVML_EVENTS");
  } else {
    setenv("GAPLESS_FAKE_NVML_EVENTS", events.c_str(), 1);
  }
}

// The fake loaded on fixture `name`. REQUIREs success.
inline std::unique_ptr<agent::NvmlLibrary> open_fake_nvml(const std::string& name,
                                                          const std::string& events = "") {
  configure_fake_nvml(nvml_fixture(name), events);
  auto lib = agent::NvmlLibrary::open(GAPLESS_FAKE_NVML);
  INFO((lib.ok() ? std::string() : lib.error()));
  REQUIRE(lib.ok());
  return std::move(lib).value();
}

// The fake's MIG state (gaplessFakeNvmlMigState in tests/fake_nvml/): per GPU its instances
// with placements and MIG device UUIDs, and how many were created and destroyed. The fake
// must be loaded (an NvmlLibrary open on it).
inline nlohmann::json fake_nvml_mig_state() {
  void* handle = dlopen(GAPLESS_FAKE_NVML, RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(handle != nullptr);
  auto state = reinterpret_cast<const char* (*)()>(dlsym(handle, "gaplessFakeNvmlMigState"));
  REQUIRE(state != nullptr);
  auto doc = nlohmann::json::parse(state());
  dlclose(handle);
  return doc;
}

inline model::Node parse_annotation(const std::string& node, const std::string& text) {
  auto r = k8s::node_from_topology_annotation(node, text);
  INFO((r.ok() ? std::string() : r.error()) << "\n" << text);
  REQUIRE(r.ok());
  return std::move(r).value();
}

}  // namespace gapless::test
