// ExtenderArgs (filter, prioritize, explain bodies) read with simdjson's On Demand API instead
// of nlohmann's lexer and DOM (issue 12). A nodeCache body carries thousands of NodeNames, a
// full-node body (nodeCacheCapable: false) a NodeList of whole Node objects, megabytes at 1,000
// nodes: nlohmann read either a character at a time into allocated values. The whole body is
// still checked as JSON (structure, UTF-8, numbers, literals, string escapes), but only what is
// used is unescaped or copied: a Node's annotations are JSON inside strings, and unescaping
// them (simdjson's DOM did, into its tape) was most of a full-node call. From the body this
// takes the names, each full-node item's text (filter answers with the passing items: the text
// as sent without whitespace, so keys, numbers and escapes stay as written) and the Pod's
// text, which the usual parser then reads (a pod is small; its checks stay the ones every verb
// applies). Private to the server.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gapless::server {
// Capacity left spare behind a request body before a verb parses it: simdjson's padding
// (SIMDJSON_PADDING, checked where it is used), so the verbs' JSON reader parses the body where
// it lies.
inline constexpr std::size_t kParsePadding = 64;
}  // namespace gapless::server

namespace gapless::server::wire {

struct ReadArgs {
  std::string pod;                 // the Pod value's JSON text
  std::vector<std::string> names;  // NodeNames, or Nodes.items[].metadata.name; in order
  bool full_mode = false;          // the names came from Nodes
  // Full mode: Nodes.items[i] as compact JSON, written on demand (filter echoes only the
  // passing few). Views into the body (or a copy it holds): call it while the body lives.
  std::function<std::string(std::size_t)> item_json;
};

// The body's arguments, or nullopt when this reader does not take it: not an object with a Pod
// and either a NodeNames array of strings or a Nodes object whose items each have a string
// metadata.name; a key it reads appears twice (keys match case-insensitively, as Go's decoder
// does); or the body is malformed. Callers then use the usual parser, which decides those
// bodies as it always did and words the errors. Duplicate keys inside values it does not read
// (a Node's status, say) are passed on as they came.
// `readable`: bytes that may be read at body.data() (0: only the body). With simdjson's padding
// (64 bytes) spare behind the body, it is read in place; otherwise copied once.
std::optional<ReadArgs> read_extender_args(std::string_view body, std::size_t readable = 0);

}  // namespace gapless::server::wire
