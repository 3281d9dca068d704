// What `kubectl gapless` prints, from what the extender serves: the GPU map of nodes (from
// GET /debug/state) and a pod's explanation (from POST /debug/explain). Pure functions of the
// JSON given (no I/O), so they are tested against a demo extender's answers; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "gapless/model/result.h"

namespace gapless::cli {

// Each node's GPU map: model, NVLink islands, fence, and per GPU its health and who holds it
// (a pod whole, pods' shares, MIG slices). `node` empty: every node; else only that one (an
// error when /debug/state lacks it).
Result<std::string> render_nodes(const nlohmann::json& state, const std::string& node);

// The request /debug/explain takes for a pod (a v1 Pod object) on every node of `state`.
// Fails when the pod is not NAMESPACE/NAME `who`.
Result<std::string> explain_request(const nlohmann::json& pod, const std::string& who,
                                    const nlohmann::json& state);

// The API path of pod `who` (NAMESPACE/NAME); an error when `who` is not of that form.
Result<std::string> pod_path(const std::string& who);

// An explanation, one block per node: verdict, scores and their terms, what the pod would get.
Result<std::string> render_explanation(const nlohmann::json& explanation);

}  // namespace gapless::cli
