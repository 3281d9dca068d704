// JSON helpers for kube-scheduler's extender wire format. Private to the server.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gapless/model/result.h"
#include "gapless/placement/engine.h"

namespace gapless::server::wire {

// Go's encoding/json matches keys case-insensitively (exact match preferred). Returns nullptr
// when the key is absent or null.
const nlohmann::json* field(const nlohmann::json& obj, std::string_view key);
inline nlohmann::json* field(nlohmann::json& obj, std::string_view key) {
  return const_cast<nlohmann::json*>(field(std::as_const(obj), key));
}

// Parses a request body into a JSON object, or a message saying what is wrong with it.
Result<nlohmann::json> parse_object(std::string_view body);

// The candidate node names of ExtenderArgs: NodeNames in nodeCache mode, else Nodes.items[]
// names. `full_mode` tells which one the request used.
Result<std::vector<std::string>> node_names(const nlohmann::json& args, bool* full_mode);

// An ExtenderArgs body (filter, prioritize), parsed as parse_object() does except that a
// top-level NodeNames array goes straight into `node_names` instead of the DOM (issue 12).
struct ExtenderArgsBody {
  nlohmann::json object;
  std::optional<std::vector<std::string>> node_names;  // set when NodeNames was an array
  bool node_names_ok = true;                           // false: an element was not a string
};
Result<ExtenderArgsBody> parse_extender_args(std::string_view body);

// node_names() of such a body; takes the captured names.
Result<std::vector<std::string>> node_names(ExtenderArgsBody& args, bool* full_mode);

// Required string field, e.g. PodUID in ExtenderBindingArgs.
Result<std::string> string_field(const nlohmann::json& obj, std::string_view key);

// Serializes for the wire; invalid UTF-8 echoed from the input is replaced, never thrown on.
std::string dump(const nlohmann::json& j);

// The answers of filter (nodeCache mode) and prioritize, written without building a DOM (issue
// 12: at 5,000 nodes the FailedNodes object and its dump cost more than the placement itself).
// Byte for byte what dump() writes for the same values, keys in the order written (the rejected
// nodes in the order filter rejected them).
//
// ExtenderFilterResult with NodeNames = r.passed, Nodes = null, Error = "".
std::string filter_names_answer(const placement::FilterResult& r);
// ExtenderFilterResult in full-node mode: Nodes = {"items":[...],"metadata":{}} with the input
// items of the passing nodes (item_json(i): the JSON of the item named names[i]; none when
// empty), each once, in input order; NodeNames = null; Error = "".
std::string filter_items_answer(const placement::FilterResult& r,
                                const std::vector<std::string>& names,
                                const std::function<std::string(std::size_t)>& item_json);
// Sizes the answers above cannot be smaller than (escapes and full-mode items only add), cheap
// to compute: an answer that would pass --max-answer-bytes is refused before it is built.
std::size_t filter_answer_bytes_at_least(const placement::FilterResult& r);
std::size_t host_priority_list_bytes_at_least(const std::vector<std::string>& hosts);
// HostPriorityList: [{"Host":hosts[i],"Score":scores[i]}, ...]. REQUIRES: equal sizes.
std::string host_priority_list(const std::vector<std::string>& hosts,
                               const std::vector<int>& scores);

}  // namespace gapless::server::wire
