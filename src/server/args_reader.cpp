#include "args_reader.h"

#include <simdjson.h>

#include <charconv>
#include <memory>
#include <optional>

#include "gapless/k8s/json_fields.h"
#include "gapless/model/ascii.h"

// read_body leaves this much room behind a body so it is parsed where it lies (else copied).
static_assert(gapless::server::kParsePadding >= simdjson::SIMDJSON_PADDING,
              "kParsePadding must cover simdjson's padding");

namespace gapless::server::wire {
namespace {

namespace od = simdjson::ondemand;

// Thrown inside the reader for "not ours: let the usual parser answer".
struct Decline {};

template <typename T>
T take(simdjson::simdjson_result<T>&& r) {
  T v;
  if (std::move(r).get(v) != simdjson::SUCCESS) throw Decline{};
  return v;
}

// As deep as JSON from outside may nest (the usual parser refuses deeper bodies and words the
// refusal). It must stay below simdjson's max_depth (1024), which On Demand checks only with an
// assertion in builds without NDEBUG.
constexpr int kMaxDepth = k8s::kMaxJsonDepth;

// The code unit of the four hex digits at s[i], or -1.
long hex4(std::string_view s, std::size_t i) {
  if (s.size() - i < 4) return -1;
  unsigned v = 0;
  const char* end = s.data() + i + 4;
  const auto [ptr, ec] = std::from_chars(s.data() + i, end, v, 16);
  return ec == std::errc() && ptr == end ? static_cast<long>(v) : -1;
}

// A string token's escapes (RFC 8259 section 7): \" \\ \/ \b \f \n \r \t, or \u and four hex
// digits, UTF-16 surrogates in pairs (as simdjson and nlohmann require). Strings this reader
// does not use are checked, not unescaped: a Node's annotations are JSON inside strings, one
// escape every few bytes, and unescaping them was most of a full-node call.
bool escapes_valid(std::string_view token) {
  const std::string_view s = token.substr(1, token.rfind('"') - 1);  // token: "…" then spaces
  const std::size_t n = s.size();
  for (std::size_t i = 0; i < n; ++i) {
    if (s[i] != '\\') continue;
    if (++i == n) return false;
    switch (s[i]) {
      case '"':
      case '\\':
      case '/':
      case 'b':
      case 'f':
      case 'n':
      case 'r':
      case 't':
        continue;
      case 'u': {
        const long unit = hex4(s, i + 1);
        i += 4;
        if (unit < 0 || (unit >= 0xDC00 && unit <= 0xDFFF)) return false;
        if (unit < 0xD800 || unit > 0xDBFF) continue;
        // A high surrogate: its low half must follow at once.
        if (n - i < 7 || s[i + 1] != '\\' || s[i + 2] != 'u') return false;
        const long low = hex4(s, i + 3);
        if (low < 0xDC00 || low > 0xDFFF) return false;
        i += 6;
        continue;
      }
      default:
        return false;
    }
  }
  return true;
}

// Every value checked as the DOM parser checks it (numbers and literals parsed, strings'
// escapes checked; UTF-8 and control characters were checked by simdjson's first stage), so a
// body this reader takes is well-formed JSON throughout, not only where it reads.
void check(od::value v, int depth) {
  if (depth > kMaxDepth) throw Decline{};
  switch (take(v.type())) {
    case od::json_type::object:
      for (auto f : take(v.get_object())) {
        od::field kv = take(std::move(f));
        const std::string_view key = take(kv.unescaped_key());
        // The top level's NodeNames: read_names reads (so checks) each of them; a second
        // pass over thousands of names was 7 % of a nodeCache filter at 10,000 nodes.
        if (depth == 1 && model::ascii_iequals(key, "nodenames")) continue;
        check(kv.value(), depth + 1);
      }
      return;
    case od::json_type::array:
      for (auto e : take(v.get_array())) check(take(std::move(e)), depth + 1);
      return;
    case od::json_type::string:
      if (!escapes_valid(v.raw_json_token())) throw Decline{};
      // Consumed, so the next step checks the comma or bracket after it (a value left
      // unconsumed is skipped by bracket counting alone).
      take(v.get_raw_json_string());
      return;
    case od::json_type::number:
      take(v.get_number());
      return;
    case od::json_type::boolean:
      take(v.get_bool());
      return;
    case od::json_type::null:
      if (!take(v.is_null())) throw Decline{};
      return;
  }
  throw Decline{};
}

// Calls on(key, value) for each of the object's `keys` it has (matched case-insensitively, as
// Go's decoder does) that is not null, in document order (values on demand are read in order);
// refuses an object that has one of them twice.
template <typename On>
void with_fields(od::object obj, On on, std::initializer_list<std::string_view> keys) {
  std::vector<bool> seen(keys.size());
  for (auto f : obj) {
    od::field kv = take(std::move(f));
    const std::string_view key = take(kv.unescaped_key());
    std::size_t i = 0;
    for (std::string_view k : keys) {
      if (model::ascii_iequals(key, k)) break;
      ++i;
    }
    if (i == keys.size()) continue;
    if (seen[i]) throw Decline{};
    seen[i] = true;
    od::value v = kv.value();
    if (take(v.is_null())) continue;
    on(key, v);
  }
}

// Nodes.items[i].metadata.name, read from the item's own text (a view into the padded body).
std::string item_name(od::parser& parser, std::string_view item) {
  const simdjson::padded_string_view padded(item.data(), item.size(),
                                            item.size() + simdjson::SIMDJSON_PADDING);
  od::document doc = take(parser.iterate(padded));
  std::optional<std::string> name;
  with_fields(take(doc.get_object()),
              [&](std::string_view, od::value meta) {
                with_fields(take(meta.get_object()),
                            [&](std::string_view, od::value n) {
                              name = std::string(take(n.get_string()));
                            },
                            {"name"});
              },
              {"metadata"});
  if (!name) throw Decline{};
  return *name;
}

// What the body's top level holds, as views into the text simdjson reads.
struct Top {
  std::optional<std::string_view> pod;  // the Pod, when it is an object
  std::optional<std::vector<std::string>> names;
  bool has_nodes = false;
  std::vector<std::string_view> items;  // Nodes.items, each item's text
};

void read_items(od::value nodes, Top& top) {
  with_fields(take(nodes.get_object()),
              [&](std::string_view, od::value list) {
                for (auto e : take(list.get_array())) {
                  top.items.push_back(take(take(take(std::move(e)).get_object()).raw_json()));
                }
              },
              {"items"});
}

void read_names(od::value list, Top& top) {
  top.names.emplace();
  for (auto n : take(list.get_array()))
    top.names->emplace_back(take(take(std::move(n)).get_string()));
}

Top read_top(od::object obj) {
  Top top;
  with_fields(obj,
              [&](std::string_view key, od::value v) {
                if (model::ascii_iequals(key, "pod")) {
                  if (take(v.type()) == od::json_type::object)
                    top.pod = take(take(v.get_object()).raw_json());
                } else if (model::ascii_iequals(key, "nodenames")) {
                  read_names(v, top);
                } else {
                  top.has_nodes = true;
                  read_items(v, top);
                }
              },
              {"pod", "nodenames", "nodes"});
  return top;
}

}  // namespace

std::optional<ReadArgs> read_extender_args(std::string_view body, std::size_t readable) try {
  // A parser per call: on demand it keeps no tape, so its only large buffers are the structural
  // index and the string buffer, sized to this body and freed with it (a parser kept per worker
  // would hold them for the largest body it ever read, for every worker). simdjson reads past
  // the end of what it parses: the body in place when that is readable, else a padded copy,
  // kept by item_json.
  std::shared_ptr<const simdjson::padded_string> copy;
  simdjson::padded_string_view padded;
  if (readable >= body.size() + simdjson::SIMDJSON_PADDING) {
    padded = simdjson::padded_string_view(body.data(), body.size(), readable);
  } else {
    copy = std::make_shared<const simdjson::padded_string>(body);
    padded = simdjson::padded_string_view(*copy);
  }
  od::parser parser;
  od::document doc = take(parser.iterate(padded));
  check(take(doc.get_value()), 1);
  // Nothing after the top-level value (on demand does not check this itself).
  if (doc.current_location().error() != simdjson::OUT_OF_BOUNDS) throw Decline{};
  doc.rewind();
  Top top = read_top(take(doc.get_object()));
  if (!top.pod || (!top.names && !top.has_nodes)) return std::nullopt;
  ReadArgs out;
  out.pod = std::string(*top.pod);
  if (top.names) {  // nodeCache mode; Nodes, if sent too, is not read (as kube-scheduler's decoder)
    out.names = std::move(*top.names);
    return out;
  }
  out.full_mode = true;
  od::parser small;
  for (std::string_view item : top.items) out.names.push_back(item_name(small, item));
  out.item_json = [copy, items = std::move(top.items)](std::size_t i) {
    const std::string_view raw = items.at(i);
    std::string compact(raw.size(), '\0');
    std::size_t n = 0;
    if (simdjson::minify(raw.data(), raw.size(), compact.data(), n) != simdjson::SUCCESS) {
      return std::string(raw);  // checked above, so not reached; the text as sent is JSON too
    }
    compact.resize(n);
    return compact;
  };
  return out;
} catch (const Decline&) {
  return std::nullopt;
}

}  // namespace gapless::server::wire
