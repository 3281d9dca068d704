// Full-node ExtenderArgs (nodeCacheCapable: false: `Nodes` is a NodeList of whole Node objects,
// megabytes at 1,000 nodes) read with simdjson instead of nlohmann's DOM (issue 12: building
// that DOM of 1,000 Node objects was most of a full-node filter). simdjson validates the whole
// body (structure, strings, numbers, UTF-8) at gigabytes per second into its tape; from it this
// takes each item's metadata.name and the item's JSON (filter answers with the passing items:
// the same values, keys in their input order, whitespace dropped), and the Pod's JSON, which the
// usual parser then reads (a pod is small; its checks stay the ones every verb applies).
// Private to the server.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gapless::server::wire {

struct FullNodeArgs {
  std::string pod;                 // the Pod value's JSON text
  std::vector<std::string> names;  // Nodes.items[].metadata.name, in order
  // Nodes.items[i] as compact JSON, written on demand (filter echoes only the passing few);
  // it holds the parsed body until it is destroyed.
  std::function<std::string(std::size_t)> item_json;
};

// The body's full-node arguments, or nullopt when this reader does not take it: the body is not
// an object with Pod and a Nodes object (NodeNames set: nodeCache mode), a key the parts above
// pass through appears twice (keys match case-insensitively, as Go's decoder does), an item
// lacks metadata.name, or the body is malformed. Callers then use the usual parser, which
// decides those bodies as before and words the errors. Duplicate keys deeper inside items,
// which Gapless does not read, are passed on as they came.
std::optional<FullNodeArgs> read_full_node_args(std::string_view body);

}  // namespace gapless::server::wire
