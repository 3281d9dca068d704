// POST /debug/explain's answer as JSON (README, "Explain a decision"). Private to the server.
// Pure functions; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gapless/placement/scheduler.h"

namespace gapless::server {

// {"Pod": "ns/name", "Profile": ..., "Nodes": [per node, input order], "Error": ""}, and
// "Consolidation" when the policy turns it on: the plan for a pod no node fits, and why.
nlohmann::json explanation_json(const std::string& pod, const std::string& profile,
                                const std::vector<placement::NodeExplanation>& nodes,
                                const placement::ConsolidationRules& rules = {},
                                const placement::ConsolidationSearch* search = nullptr);

// The answer to a request that could not be explained: every key present, Error set.
nlohmann::json explanation_error(const std::string& message);

}  // namespace gapless::server
