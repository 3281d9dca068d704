#include "wire.h"

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "gapless/k8s/json_fields.h"
#include "gapless/model/ascii.h"

namespace gapless::server::wire {

using nlohmann::json;

const json* field(const json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  const json* found = nullptr;
  if (auto it = obj.find(key); it != obj.end()) {
    found = &*it;
  } else {
    for (auto it2 = obj.begin(); it2 != obj.end(); ++it2) {
      if (model::ascii_iequals(it2.key(), key)) {
        found = &it2.value();
        break;
      }
    }
  }
  return found == nullptr || found->is_null() ? nullptr : found;
}

namespace {

// Builds the DOM through nlohmann's plain SAX DOM builder and refuses duplicate keys on the way.
//
// Keys are matched case-insensitively (field()), so "Pod" twice, or "Pod" and "pod", would leave
// it to chance which one counts: such a body is refused. This used to be a json::parse callback,
// but nlohmann 3.11.2's callback parser scans the whole parent container after every object
// ends (to erase discarded values), so an array of n objects took O(n^2): 100k objects, 2.3 s.
// Wrapping the plain builder keeps every event O(1) beyond the key's own length.
class KeyCheckingDomBuilder {
 public:
  // With `capture_names`, a top-level NodeNames array goes into names() instead of the DOM
  // (issue 12: building 5,000 DOM strings and copying them out cost more than the placement).
  KeyCheckingDomBuilder(json& result, bool capture_names)
      : dom_(result, /*allow_exceptions=*/true), capture_names_(capture_names) {}

  bool null() { return captured_other() || (flush() && dom_.null()); }
  bool boolean(bool v) { return captured_other() || (flush() && dom_.boolean(v)); }
  bool number_integer(json::number_integer_t v) {
    return captured_other() || (flush() && dom_.number_integer(v));
  }
  bool number_unsigned(json::number_unsigned_t v) {
    return captured_other() || (flush() && dom_.number_unsigned(v));
  }
  bool number_float(json::number_float_t v, const json::string_t& s) {
    return captured_other() || (flush() && dom_.number_float(v, s));
  }
  bool binary(json::binary_t& v) { return captured_other() || (flush() && dom_.binary(v)); }
  bool string(json::string_t& v) {
    if (capturing_) {
      if (skip_depth_ == 0) names_->push_back(std::move(v));
      return true;
    }
    return flush() && dom_.string(v);
  }
  bool start_object(std::size_t n) {
    if (captured_other()) {
      ++skip_depth_;
      return true;
    }
    flush();
    open_keys_.emplace_back();
    ++depth_;
    return dom_.start_object(n);
  }
  bool key(json::string_t& k) {
    if (capturing_) return true;  // in an object inside NodeNames: refused anyway
    check_key(k);
    if (capture_names_ && depth_ == 1 && !names_ && model::ascii_iequals(k, "nodenames")) {
      pending_key_ = k;  // forwarded by flush() unless its value is an array
      return true;
    }
    return dom_.key(k);
  }
  bool end_object() {
    if (capturing_) {
      --skip_depth_;
      return true;
    }
    open_keys_.pop_back();
    --depth_;
    return dom_.end_object();
  }
  bool start_array(std::size_t n) {
    if (captured_other()) {
      ++skip_depth_;
      return true;
    }
    if (pending_key_) {
      pending_key_.reset();
      capturing_ = true;
      names_.emplace();
      return true;
    }
    ++depth_;
    return dom_.start_array(n);
  }
  bool end_array() {
    if (capturing_) {
      if (skip_depth_ == 0)
        capturing_ = false;
      else
        --skip_depth_;
      return true;
    }
    --depth_;
    return dom_.end_array();
  }
  template <class Exception>
  bool parse_error(std::size_t pos, const std::string& token, const Exception& ex) {
    return dom_.parse_error(pos, token, ex);  // throws ex
  }

  // The first key seen twice in one object (as typed), or "".
  const std::string& duplicate() const { return duplicate_; }
  // The NodeNames array, when captured; names_ok() is false if an element was not a string.
  std::optional<std::vector<std::string>>& names() { return names_; }
  bool names_ok() const { return names_ok_; }

 private:
  void check_key(const std::string& k) {
    if (!duplicate_.empty() || open_keys_.empty()) return;
    if (!open_keys_.back().insert(model::ascii_lower(k)).second) duplicate_ = k;
  }

  // Inside the captured NodeNames: a value other than a string. Returns whether capturing.
  bool captured_other() {
    if (capturing_ && skip_depth_ == 0) names_ok_ = false;
    return capturing_;
  }

  // Forwards a held-back NodeNames key whose value turned out not to be an array.
  bool flush() {
    if (pending_key_) {
      dom_.key(*pending_key_);
      pending_key_.reset();
    }
    return true;
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  std::vector<std::unordered_set<std::string>> open_keys_;  // one set per open object
  std::string duplicate_;
  const bool capture_names_;
  std::size_t depth_ = 0;  // open objects and arrays in the DOM
  std::optional<std::string> pending_key_;
  bool capturing_ = false;
  std::size_t skip_depth_ = 0;  // containers open inside the captured array
  std::optional<std::vector<std::string>> names_;
  bool names_ok_ = true;
};

// Parses through `builder` into `j`; the error message for the wire, or "".
std::string parse_into(std::string_view body, KeyCheckingDomBuilder& builder, const json& j) {
  // Answers and messages echo parts of the body, and dumping recurses once per level.
  if (!k8s::json_depth_ok(body)) return std::string("malformed JSON: ") + k8s::kJsonTooDeep;
  try {
    json::sax_parse(body, &builder);
  } catch (const json::exception& e) {
    return std::string("malformed JSON: ") + e.what();
  }
  if (!builder.duplicate().empty()) {
    return "malformed JSON: duplicate key \"" + builder.duplicate() +
           "\" in one object (keys are matched case-insensitively)";
  }
  if (!j.is_object()) return "request body must be a JSON object";
  return "";
}

constexpr const char* kBadNodeNames = "NodeNames must be an array of node names";

}  // namespace

Result<json> parse_object(std::string_view body) {
  json j;
  KeyCheckingDomBuilder builder(j, /*capture_names=*/false);
  if (std::string error = parse_into(body, builder, j); !error.empty()) return Error{error};
  return j;
}

Result<ExtenderArgsBody> parse_extender_args(std::string_view body) {
  ExtenderArgsBody out;
  KeyCheckingDomBuilder builder(out.object, /*capture_names=*/true);
  if (std::string error = parse_into(body, builder, out.object); !error.empty()) {
    return Error{error};
  }
  out.node_names = std::move(builder.names());
  out.node_names_ok = builder.names_ok();
  return out;
}

Result<std::vector<std::string>> node_names(ExtenderArgsBody& args, bool* full_mode) {
  if (!args.node_names) return node_names(args.object, full_mode);
  *full_mode = false;
  if (!args.node_names_ok) return Error{kBadNodeNames};
  return std::move(*args.node_names);
}

Result<std::vector<std::string>> node_names(const json& args, bool* full_mode) {
  std::vector<std::string> out;
  *full_mode = false;
  if (const json* names = field(args, "NodeNames")) {
    if (!names->is_array()) return Error{kBadNodeNames};
    for (const json& n : *names) {
      if (!n.is_string()) return Error{kBadNodeNames};
      out.push_back(n.get<std::string>());
    }
    return out;
  }
  if (const json* nodes = field(args, "Nodes")) {
    *full_mode = true;
    const json* items = nodes->is_object() ? field(*nodes, "items") : nullptr;
    if (!nodes->is_object() || (items != nullptr && !items->is_array())) {
      return Error{"Nodes must be a NodeList with an items array"};
    }
    if (items == nullptr) return out;
    for (const json& item : *items) {
      const json* meta = field(item, "metadata");
      const json* name = meta != nullptr ? field(*meta, "name") : nullptr;
      if (name == nullptr || !name->is_string()) {
        return Error{"Nodes.items[] needs metadata.name"};
      }
      out.push_back(name->get<std::string>());
    }
  }
  return out;
}

Result<std::string> string_field(const json& obj, std::string_view key) {
  const json* v = field(obj, key);
  if (v == nullptr || !v->is_string() || v->get_ref<const std::string&>().empty()) {
    return Error{std::string(key) + " is required and must be a non-empty string"};
  }
  return v->get<std::string>();
}

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {

// Appends `s` as dump() writes a JSON string. Node names are DNS names, so the fast path (no
// escaping) is the rule; anything else goes through nlohmann for the same escapes and
// replacement of invalid UTF-8.
void append_string(std::string& out, std::string_view s) {
  const bool plain = std::all_of(
      s.begin(), s.end(), [](char c) { return c >= 0x20 && c != '"' && c != '\\' && c != 0x7f; });
  if (!plain) {
    out += dump(json(std::string(s)));
    return;
  }
  out += '"';
  out += s;
  out += '"';
}

using Rejections = std::vector<const placement::FilterResult::Rejection*>;

// {"node":"reason",...} in the order filter rejected them (the request's order; names come
// once). Not sorted as nlohmann orders keys: a JSON object's order means nothing to Go's decoder,
// and sorting 10,000 names was 12 % of a nodeCache filter at 10,000 nodes.
void append_rejections(std::string& out, const Rejections& rejections,
                       const std::vector<std::string>& reason_json) {
  out += '{';
  for (std::size_t i = 0; i < rejections.size(); ++i) {
    if (i > 0) out += ',';
    append_string(out, rejections[i]->node);
    out += ':';
    out += reason_json[rejections[i]->reason];
  }
  out += '}';
}

// {"Error":"","FailedAndUnresolvableNodes":{...},"FailedNodes":{...}: the head both filter
// answers share.
//
// The rejected nodes are listed only when no node passed. kube-scheduler reads these maps only
// for a pod it cannot place (the FitError's event text, and which nodes preemption may try);
// once one node passes it schedules the pod and drops them unread. Listed anyway they were most
// of the answer, which kube-scheduler decodes for every pod: with keepBest, every node that fits
// but is not among the best (4,992 of 5,000 nodes, about 270 KB).
std::string filter_answer_head(const placement::FilterResult& r) {
  if (!r.passed.empty())
    return "{\"Error\":\"\",\"FailedAndUnresolvableNodes\":{},\"FailedNodes\":{}";
  std::vector<std::string> reason_json;  // each reason escaped once, however many nodes share it
  for (const auto& reason : r.reasons) reason_json.push_back(dump(json(reason.text)));
  Rejections failed;
  Rejections unresolvable;
  for (const auto& rejection : r.rejected) {
    (r.reasons[rejection.reason].unresolvable ? unresolvable : failed).push_back(&rejection);
  }
  std::string out = "{\"Error\":\"\",\"FailedAndUnresolvableNodes\":";
  append_rejections(out, unresolvable, reason_json);
  out += ",\"FailedNodes\":";
  append_rejections(out, failed, reason_json);
  return out;
}

}  // namespace

std::string filter_items_answer(const placement::FilterResult& r,
                                const std::vector<std::string>& names,
                                const std::function<std::string(std::size_t)>& item_json) {
  std::unordered_set<std::string_view> pass(r.passed.begin(), r.passed.end());
  std::string out = filter_answer_head(r);
  out += ",\"NodeNames\":null,\"Nodes\":{\"items\":[";
  bool first = true;
  for (std::size_t i = 0; item_json && i < names.size(); ++i) {
    if (pass.erase(names[i]) == 0) continue;
    if (!first) out += ',';
    first = false;
    out += item_json(i);
  }
  out += "],\"metadata\":{}}}";
  return out;
}

std::string filter_names_answer(const placement::FilterResult& r) {
  std::string out = filter_answer_head(r);
  out += ",\"NodeNames\":[";
  for (std::size_t i = 0; i < r.passed.size(); ++i) {
    if (i > 0) out += ',';
    append_string(out, r.passed[i]);
  }
  out += "],\"Nodes\":null}";
  return out;
}

std::size_t filter_answer_bytes_at_least(const placement::FilterResult& r) {
  std::size_t bytes = 0;
  for (const std::string& name : r.passed) bytes += name.size() + 3;  // "name",
  if (!r.passed.empty()) return bytes;  // the rejected nodes are listed only when none passed
  for (const auto& rejection : r.rejected) {
    bytes += rejection.node.size() + r.reasons[rejection.reason].text.size() + 6;  // "n":"r",
  }
  return bytes;
}

std::size_t host_priority_list_bytes_at_least(const std::vector<std::string>& hosts) {
  std::size_t bytes = 0;
  for (const std::string& host : hosts) bytes += host.size() + 22;  // {"Host":"h","Score":0},
  return bytes;
}

std::string host_priority_list(const std::vector<std::string>& hosts,
                               const std::vector<int>& scores) {
  std::string out = "[";
  out.reserve(hosts.size() * 40);
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    if (i > 0) out += ',';
    out += "{\"Host\":";
    append_string(out, hosts[i]);
    out += ",\"Score\":";
    out += std::to_string(scores[i]);
    out += '}';
  }
  out += ']';
  return out;
}

}  // namespace gapless::server::wire
