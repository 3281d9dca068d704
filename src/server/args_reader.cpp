#include "args_reader.h"

#include <simdjson.h>

#include <memory>
#include <optional>

#include "gapless/model/ascii.h"

namespace gapless::server::wire {
namespace {

namespace dom = simdjson::dom;

// Thrown inside the reader for "not ours: let the usual parser answer".
struct Decline {};

template <typename T>
T take(simdjson::simdjson_result<T>&& r) {
  T v;
  if (std::move(r).get(v) != simdjson::SUCCESS) throw Decline{};
  return v;
}

// The object's value for `key` (matched case-insensitively, as Go's decoder does), or nullopt
// when absent or null; refuses an object that has the key twice.
std::optional<dom::element> field(dom::object obj, std::string_view key) {
  std::optional<dom::element> found;
  bool seen = false;
  for (dom::key_value_pair kv : obj) {
    if (!model::ascii_iequals(kv.key, key)) continue;
    if (seen) throw Decline{};
    seen = true;
    if (kv.value.type() != dom::element_type::NULL_VALUE) found = kv.value;
  }
  return found;
}

dom::element required(std::optional<dom::element> e) {
  if (!e) throw Decline{};
  return *e;
}

std::string read_name(dom::element item) {
  const dom::object meta = take(required(field(take(item.get_object()), "metadata")).get_object());
  return std::string(take(required(field(meta, "name")).get_string()));
}

// NodeNames as names: every element a string, else declined (the usual parser words the error).
void read_names(dom::element names, ReadArgs& out) {
  for (dom::element n : take(names.get_array())) out.names.emplace_back(take(n.get_string()));
}

}  // namespace

std::optional<ReadArgs> read_extender_args(std::string_view body) try {
  // A parser per call, kept alive by item_json: its buffers are sized to this body and freed
  // with it (a parser kept per worker thread would hold ~14 bytes per byte of the largest body
  // it ever read, for every worker). Only the pages the parse touches cost anything.
  struct Parsed {
    dom::parser parser;
    std::vector<dom::element> items;
  };
  auto parsed = std::make_shared<Parsed>();
  const dom::element doc = take(parsed->parser.parse(body.data(), body.size()));
  const dom::object top = take(doc.get_object());
  const auto pod = field(top, "pod");
  const auto names = field(top, "nodenames");
  const auto nodes = field(top, "nodes");
  if (!pod || !pod->is_object() || (!names && !nodes)) return std::nullopt;
  ReadArgs out;
  out.pod = simdjson::minify(*pod);
  if (names) {  // nodeCache mode; Nodes, if sent too, is not read (as kube-scheduler's decoder)
    read_names(*names, out);
    return out;
  }
  out.full_mode = true;
  if (const auto items = field(take(nodes->get_object()), "items")) {
    for (dom::element item : take(items->get_array())) {
      out.names.push_back(read_name(item));
      parsed->items.push_back(item);
    }
  }
  out.item_json = [parsed](std::size_t i) { return simdjson::minify(parsed->items.at(i)); };
  return out;
} catch (const Decline&) {
  return std::nullopt;
}

}  // namespace gapless::server::wire
