// --cluster FILE: Kubernetes objects (JSON or YAML) -> model::Cluster. Nodes first, then the
// allocation records of bound pods, so that a record always finds its node's inventory.
#include "gapless/k8s/cluster_file.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <set>
#include <sstream>

#include "../common/yaml_load_all.h"
#include "gapless/k8s/allocation_record.h"
#include "gapless/k8s/json_fields.h"
#include "gapless/k8s/node_inventory.h"
#include "gapless/k8s/pod_request.h"

namespace gapless::k8s {

using nlohmann::json;

namespace {

constexpr int kMaxYamlDepth = 64;
// Aliases could otherwise expand without end: nine levels of ten aliases each make 10^9 nodes
// of a 430-byte file. Without aliases a document has at most about one node per byte, so
// kYamlNodesPerByte leaves room for ordinary alias use and still stops such a file early (a
// fixed budget of 10M nodes took 36 s and 1.4 GB under ASan; fuzz/regressions/cluster_file/).
constexpr std::size_t kMaxYamlNodes = 10'000'000;
constexpr std::size_t kYamlNodesPerByte = 16;

// A plain (unquoted) YAML scalar as YAML 1.2's core schema reads it, limited to what Kubernetes
// objects use: booleans and integers; everything else, floats included, stays a string.
json plain_scalar(const std::string& s) {
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  std::string_view digits = s;
  if (!digits.empty() && (digits[0] == '-' || digits[0] == '+')) digits.remove_prefix(1);
  bool integer = !digits.empty() && digits.find_first_not_of("0123456789") == std::string::npos;
  if (integer) {
    std::int64_t v = 0;
    const char* begin = s.data() + (s[0] == '+' ? 1 : 0);
    auto [ptr, ec] = std::from_chars(begin, s.data() + s.size(), v);
    if (ec == std::errc() && ptr == s.data() + s.size()) return v;
  }
  return s;
}

// `budget`: how many more nodes may be converted.
Status yaml_to_json(const YAML::Node& n, int depth, std::size_t* budget, json* out) {
  if (depth > kMaxYamlDepth) return Error{"YAML nested too deeply"};
  if (*budget == 0) return Error{"YAML document too large (aliases expand to too many nodes)"};
  --*budget;
  switch (n.Type()) {
    case YAML::NodeType::Scalar:
      // "!" marks quoted and block scalars: those are strings whatever they contain.
      *out = n.Tag() == "?" ? plain_scalar(n.Scalar()) : json(n.Scalar());
      return Status::Ok();
    case YAML::NodeType::Sequence:
      *out = json::array();
      for (const YAML::Node& item : n) {
        json v;
        if (Status s = yaml_to_json(item, depth + 1, budget, &v); !s.ok()) return s;
        out->push_back(std::move(v));
      }
      return Status::Ok();
    case YAML::NodeType::Map:
      *out = json::object();
      for (const auto& kv : n) {
        if (!kv.first.IsScalar()) return Error{"YAML mapping keys must be scalars"};
        json v;
        if (Status s = yaml_to_json(kv.second, depth + 1, budget, &v); !s.ok()) return s;
        (*out)[kv.first.Scalar()] = std::move(v);
      }
      return Status::Ok();
    default:
      *out = nullptr;
      return Status::Ok();
  }
}

// The documents of the file: one for JSON, one per `---` section for YAML.
Status read_documents(const std::string& text, std::vector<json>* docs) {
  auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && (text[first] == '{' || text[first] == '[')) {
    // Depth-limited like the YAML path: messages quote values, and dumping one recurses.
    if (!json_depth_ok(text)) return Error{std::string("not valid JSON: ") + kJsonTooDeep};
    json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) return Error{"not valid JSON"};
    if (doc.is_array()) {
      for (json& d : doc) docs->push_back(std::move(d));
    } else {
      docs->push_back(std::move(doc));
    }
    return Status::Ok();
  }
  std::vector<YAML::Node> yaml;
  try {  // yaml-cpp reports syntax errors only by exception
    yaml = gapless::yaml::load_all(text);
  } catch (const YAML::Exception& e) {
    return Error{std::string("not valid YAML: ") + e.what()};
  }
  std::size_t budget = std::min(kMaxYamlNodes, kYamlNodesPerByte * text.size() + 10'000);
  for (const YAML::Node& y : yaml) {
    json doc;
    if (Status s = yaml_to_json(y, 0, &budget, &doc); !s.ok()) return s;
    if (!doc.is_null()) docs->push_back(std::move(doc));
  }
  return Status::Ok();
}

struct Objects {
  std::vector<const json*> nodes;
  std::vector<const json*> pods;
  std::vector<std::string> warnings;
};

// Sorts one document's objects into nodes and pods. A list's items may omit `kind` when the
// list says it (the API server's NodeList/PodList do).
Status collect(const json& doc, const std::string& where, Objects* out) {
  if (!doc.is_object()) return Error{where + ": must be a Kubernetes object or list"};
  const std::string kind = string_field(doc, "kind");
  auto add = [&](const json& obj, const std::string& item_kind, const std::string& at) -> Status {
    if (item_kind == "Node") {
      out->nodes.push_back(&obj);
    } else if (item_kind == "Pod") {
      out->pods.push_back(&obj);
    } else if (item_kind.empty()) {
      return Error{at + ": kind is missing"};
    } else {
      out->warnings.push_back(at + ": ignoring kind " + item_kind);
    }
    return Status::Ok();
  };
  if (kind != "List" && kind != "NodeList" && kind != "PodList") return add(doc, kind, where);
  const json* items = field(doc, "items");
  if (items == nullptr) return Status::Ok();
  if (!items->is_array()) return Error{where + ".items: must be a list"};
  const std::string implied = kind == "NodeList" ? "Node" : kind == "PodList" ? "Pod" : "";
  for (std::size_t i = 0; i < items->size(); ++i) {
    const json& item = (*items)[i];
    const std::string at = where + ".items[" + std::to_string(i) + "]";
    if (!item.is_object()) return Error{at + ": must be an object"};
    std::string item_kind = string_field(item, "kind");
    if (Status s = add(item, item_kind.empty() ? implied : item_kind, at); !s.ok()) return s;
  }
  return Status::Ok();
}

// Restores one bound pod's allocation record, fencing its node when the record cannot be used.
void restore_pod(const json& pod, ClusterFile* out) {
  const json* meta = field(pod, "metadata");
  const json* status = field(pod, "status");
  const std::string phase = status != nullptr ? string_field(*status, "phase") : std::string();
  if (phase == "Succeeded" || phase == "Failed") return;
  const json* spec = field(pod, "spec");
  const std::string node = spec != nullptr ? string_field(*spec, "nodeName") : std::string();
  if (node.empty()) return;  // pending: nothing held yet
  std::string ns = meta ? string_field(*meta, "namespace") : std::string();
  if (ns.empty()) ns = "default";
  const std::string name = meta ? string_field(*meta, "name") : std::string();
  std::string uid = meta ? string_field(*meta, "uid") : std::string();
  if (uid.empty()) uid = ns + "/" + name;  // hand-written files often omit uids
  const std::string who = "pod " + ns + "/" + name;

  Result<ParsedPod> parsed = parse_pod(pod);
  model::HostResources host;
  std::int32_t priority = 0;
  if (parsed.ok()) {
    parsed->info.uid = uid;
    host = parsed->request.host;
    priority = parsed->info.priority;
    out->pods.push_back(*parsed);
  }
  const json* record = field(field(meta, "annotations"), kAllocationAnnotation);
  if (record == nullptr) {
    if (!parsed.ok() || parsed->request.kind != model::RequestKind::kNone) {
      out->warnings.push_back(who + " on node " + node + " has no " +
                              std::string(kAllocationAnnotation) +
                              " record; its GPUs are not counted");
    }
    // Whoever bound it, it holds the node's CPU and memory: counted for scoring.
    if (host != model::HostResources{} && out->cluster.find_node(node) != nullptr) {
      model::Allocation a;
      a.pod_uid = uid;
      a.pod_ns = ns;
      a.pod_name = name;
      a.node = node;
      a.host = host;
      a.priority = priority;
      (void)out->cluster.restore(a);  // cannot fail: the node exists, host is never refused
    }
    return;
  }
  if (out->cluster.find_node(node) == nullptr) {
    out->warnings.push_back(who + " is bound to unknown node " + node + "; ignored");
    return;
  }
  auto fence = [&](const std::string& why) {
    out->cluster.fence(node, "allocation record of " + who + " unusable: " + why);
    out->warnings.push_back(who + ": " + why + "; node " + node + " fenced");
  };
  if (!record->is_string()) return fence(std::string(kAllocationAnnotation) + ": must be a string");
  Result<model::Allocation> a =
      decode_allocation_record(record->get_ref<const std::string&>(), ns, name, uid);
  if (!a.ok()) return fence(a.error());
  if (a->node != node) return fence("record names node " + a->node + ", pod runs on " + node);
  a->host = host;
  a->priority = priority;
  if (Status s = out->cluster.restore(*a); !s.ok()) return fence(s.error());
}

}  // namespace

Result<ClusterFile> parse_cluster_file(const std::string& text, const std::string& source_name) {
  const std::string prefix = source_name + ": ";
  std::vector<json> docs;
  if (Status s = read_documents(text, &docs); !s.ok()) return Error{prefix + s.error()};
  Objects objects;
  for (std::size_t i = 0; i < docs.size(); ++i) {
    std::string where = docs.size() == 1 ? "document" : "document " + std::to_string(i + 1);
    if (Status s = collect(docs[i], where, &objects); !s.ok()) return Error{prefix + s.error()};
  }

  ClusterFile out;
  out.cluster.set_check_host(false);  // CPU and memory are counted for scoring, never refused
  out.warnings = std::move(objects.warnings);
  for (std::string& w : out.warnings) w = prefix + w;
  std::set<std::string> names;
  for (const json* obj : objects.nodes) {
    Result<model::Node> node = node_from_json(*obj);
    if (!node.ok()) return Error{prefix + node.error()};
    if (!names.insert(node->name).second) {
      return Error{prefix + "node " + node->name + " appears twice"};
    }
    out.cluster.upsert_node(std::move(*node));
  }
  const std::size_t before = out.warnings.size();
  for (const json* pod : objects.pods) restore_pod(*pod, &out);
  for (std::size_t i = before; i < out.warnings.size(); ++i) {
    out.warnings[i] = prefix + out.warnings[i];
  }
  return out;
}

Result<ClusterFile> load_cluster_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{"cannot open cluster file " + path};
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Error{"cannot read cluster file " + path};
  return parse_cluster_file(text.str(), path);
}

}  // namespace gapless::k8s
