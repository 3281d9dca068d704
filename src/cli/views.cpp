#include "gapless/cli/views.h"

#include <map>
#include <sstream>
#include <vector>

namespace gapless::cli {

using nlohmann::json;

namespace {

// Who holds what on each GPU of each node, from the allocation records: node -> index -> lines.
using Holders = std::map<std::string, std::map<int, std::vector<std::string>>>;

std::string share_text(const json& g) {
  std::string out;
  auto add = [&](const char* key, const char* unit) {
    if (!g.contains(key)) return;
    out += (out.empty() ? "" : ", ") + std::to_string(g.value(key, 0)) + unit;
  };
  add("memoryMiB", " MiB");
  add("computeMilli", " milli");
  add("gpuMem", " gpushare units");
  return out.empty() ? "whole" : "share " + out;
}

Holders holders_of(const json& state) {
  Holders out;
  for (const json& a : state.value("allocations", json::array())) {
    const std::string pod = a.value("pod", "?");
    const json& r = a.at("record");
    const std::string node = r.value("node", "");
    for (const json& g : r.value("gpus", json::array())) {
      out[node][g.value("index", -1)].push_back(pod + " (" + share_text(g) + ")");
    }
    for (const json& m : r.value("mig", json::array())) {
      out[node][m.value("gpu", -1)].push_back(pod + " (MIG " + m.value("profile", "?") + ")");
    }
  }
  return out;
}

std::string islands_text(const json& islands) {
  if (islands.empty()) return "none";
  std::string out;
  for (const json& island : islands) {
    out += out.empty() ? "[" : " [";
    for (std::size_t i = 0; i < island.size(); ++i) {
      out += (i ? "," : "") + std::to_string(island[i].get<int>());
    }
    out += "]";
  }
  return out;
}

void render_node(std::ostringstream& out, const json& n, const Holders& holders) {
  const json& gpus = n.at("gpus");
  const std::string name = n.at("name");
  const std::string fenced = n.value("fenced", "");
  out << name << "  " << (gpus.empty() ? std::string("-") : gpus[0].value("model", "?")) << "  "
      << gpus.size()
      << " GPU(s)  NVLink islands: " << islands_text(n.value("nvlinkIslands", json::array()))
      << (fenced.empty() ? "" : "  FENCED: " + fenced) << "\n";
  const auto node_holders = holders.find(name);
  for (const json& g : gpus) {
    const int index = g.value("index", -1);
    out << "  GPU " << index << "  " << (g.value("healthy", true) ? "healthy" : "UNHEALTHY");
    if (g.value("migEnabled", false)) out << "  MIG";
    // Drift (docs/node-drift.md): containers really on this GPU that no record charges for it.
    const json users = g.value("inUseBy", json::array());
    const bool drift_fenced = users.is_array() && !users.empty();
    if (drift_fenced) {
      out << "  FENCED (drift): in use by";
      for (const json& u : users) out << " " << (u.is_string() ? u.get<std::string>() : "?");
    }
    std::vector<std::string> held;
    if (node_holders != holders.end()) {
      if (auto it = node_holders->second.find(index); it != node_holders->second.end())
        held = it->second;
    }
    if (held.empty() && !drift_fenced) out << "  free";
    for (const std::string& h : held) out << "  " << h;
    out << "\n";
  }
  if (node_holders != holders.end()) {
    if (auto it = node_holders->second.find(-1); it != node_holders->second.end()) {
      for (const std::string& h : it->second) out << "  MIG pool  " << h << "\n";
    }
  }
}

std::string number(double v) {
  std::ostringstream s;
  s.precision(3);
  s << v;
  return s.str();
}

void render_terms(std::ostringstream& out, const json& c) {
  std::vector<json> terms(c.at("Node").begin(), c.at("Node").end());
  for (const char* k : {"Gpu", "Connectivity", "IslandKept"}) {
    if (!c.at(k).is_null()) terms.push_back(c.at(k));
  }
  out << "  terms:";
  for (const json& t : terms) {
    out << " " << t.value("Name", "?") << "=" << number(t.value("Score", 0.0)) << "x"
        << number(t.value("Weight", 0.0));
  }
  out << "\n";
}

void render_placement(std::ostringstream& out, const json& p) {
  out << "  would get:";
  for (const json& g : p.value("Gpus", json::array())) {
    const std::string uuid = g.value("Uuid", "");
    out << " GPU " << g.value("Index", -1) << (uuid.empty() ? "" : " (" + uuid + ")");
    if (!g.value("Whole", true)) {
      out << " (" << g.value("MemoryMiB", 0) << " MiB, " << g.value("ComputeMilli", 0) << " milli)";
    }
  }
  for (const json& m : p.value("Mig", json::array())) {
    out << " MIG " << m.value("Profile", "?") << " on GPU " << m.value("Gpu", -1) << " at slice "
        << m.value("Start", -1);
  }
  out << "\n";
}

}  // namespace

Result<std::string> render_nodes(const json& state, const std::string& node) {
  try {
    const Holders holders = holders_of(state);
    std::ostringstream out;
    bool found = false;
    for (const json& n : state.at("nodes")) {
      if (!node.empty() && n.at("name") != node) continue;
      found = true;
      render_node(out, n, holders);
    }
    if (!found) return Error{"node " + node + " is not in Gapless's inventory"};
    return out.str();
  } catch (const json::exception& e) {
    return Error{std::string("unexpected /debug/state: ") + e.what()};
  }
}

Result<std::string> pod_path(const std::string& who) {
  const std::size_t slash = who.find('/');
  if (slash == 0 || slash == std::string::npos || slash + 1 == who.size() ||
      who.find_first_of("/?#%", slash + 1) != std::string::npos) {
    return Error{"the pod must be given as NAMESPACE/NAME, got \"" + who + "\""};
  }
  return "/api/v1/namespaces/" + who.substr(0, slash) + "/pods/" + who.substr(slash + 1);
}

Result<std::string> explain_request(const json& pod, const std::string& who, const json& state) {
  try {
    const json& meta = pod.at("metadata");
    const std::string key = meta.value("namespace", "default") + "/" + meta.value("name", "");
    if (key != who) return Error{"the pod file holds " + key + ", not " + who};
    json names = json::array();
    for (const json& n : state.at("nodes")) names.push_back(n.at("name"));
    return json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", std::move(names)}}.dump();
  } catch (const json::exception& e) {
    return Error{std::string("not a Pod: ") + e.what()};
  }
}

Result<std::string> render_explanation(const json& e) {
  try {
    if (!e.at("Error").get<std::string>().empty()) return Error{e.at("Error").get<std::string>()};
    std::ostringstream out;
    out << "pod " << e.at("Pod").get<std::string>() << ", profile "
        << e.at("Profile").get<std::string>() << "\n";
    for (const json& n : e.at("Nodes")) {
      out << n.at("Node").get<std::string>() << "  " << n.at("Verdict").get<std::string>();
      if (n.at("Verdict") != "passed") {
        out << ": " << n.at("Reason").get<std::string>() << "\n";
        continue;
      }
      out << "  score " << n.at("Score").get<int>() << "/10  raw "
          << number(n.at("RawScore").get<double>()) << "\n";
      render_terms(out, n.at("Components"));
      if (n.at("Placement").is_object()) render_placement(out, n.at("Placement"));
    }
    return out.str();
  } catch (const json::exception& e2) {
    return Error{std::string("unexpected /debug/explain answer: ") + e2.what()};
  }
}

}  // namespace gapless::cli
