// Policy files (policies/*.yaml) -> placement::Policy. Validation is strict: unknown keys, wrong
// types and bad values are errors of the form "<source>:<line>: <key path>: <what is wrong>", and
// nothing thrown by yaml-cpp leaves this file. The accepted format is documented in
// policies/default.yaml (profiles) and policies/quotas.yaml (quotas, read by quota_reader.cpp).
#include "gapless/policy/loader.h"

#include <yaml-cpp/yaml.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "../common/yaml_load_all.h"
#include "consolidation_reader.h"
#include "quota_reader.h"
#include "yaml_reader.h"

namespace gapless::policy {
namespace {

using detail::describe;
using detail::Field;
using detail::Fields;
using detail::find_field;
using detail::join;
using detail::Keys;
using detail::location;
using placement::Policy;
using placement::Profile;
using placement::Selector;
using placement::WeightedStrategy;

const Keys kPolicyKeys = {"version", "default", "profiles", "quotas", "consolidation"};
const Keys kProfileKeys = {"name", "node", "gpu", "topology", "filter", "drain", "select"};
const Keys kFilterKeys = {"keepBest"};
const Keys kDrainKeys = {"minGpus"};
const Keys kNodeKeys = {"strategies"};
const Keys kGpuKeys = {"strategies", "weight"};
const Keys kTopologyKeys = {"weight"};
const Keys kSelectKeys = {"namespaces", "priorityClasses", "podLabels"};

bool valid_profile_name(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

// Walks one policy document.
class PolicyReader : public detail::YamlReader {
 public:
  using YamlReader::YamlReader;

  bool read_strategies(const Fields& level, const YAML::Mark& mark, const std::string& path,
                       std::vector<WeightedStrategy>* out) {
    const Field* f = nullptr;
    Fields entries;
    if (!require(level, "strategies", mark, path, &f) ||
        !read_map(f->value, f->mark(), f->path, nullptr, true, &entries)) {
      return false;
    }
    if (entries.empty()) {
      return fail(f->mark(), f->path,
                  "name at least one strategy (known: " + join(placement::strategy_names()) + ")");
    }
    for (const Field& e : entries) {
      WeightedStrategy ws;
      ws.strategy = placement::find_strategy(e.key);
      if (!ws.strategy) {
        return fail(e.key_node.Mark(), e.path,
                    "unknown strategy \"" + e.key +
                        "\" (known: " + join(placement::strategy_names()) + ")");
      }
      if (!read_number(e, 0, false, &ws.weight)) return false;
      out->push_back(ws);
    }
    std::sort(out->begin(), out->end(), [](const WeightedStrategy& a, const WeightedStrategy& b) {
      return a.strategy->name() < b.strategy->name();
    });
    return true;
  }

  bool read_selector(const Field& f, Selector* out) {
    Fields fields;
    if (!read_map(f.value, f.mark(), f.path, &kSelectKeys, true, &fields)) return false;
    for (const Field& s : fields) {
      if (s.key == "namespaces" && !read_string_list(s, &out->namespaces)) return false;
      if (s.key == "priorityClasses" && !read_string_list(s, &out->priority_classes)) return false;
      if (s.key != "podLabels") continue;
      Fields labels;
      if (!read_map(s.value, s.mark(), s.path, nullptr, true, &labels)) return false;
      for (const Field& l : labels) {
        if (l.key.empty()) return fail(l.key_node.Mark(), l.path, "label key must not be empty");
        std::string v;
        if (!read_string(l.value, l.mark(), l.path, &v)) return false;
        out->pod_labels[l.key] = std::move(v);
      }
    }
    return true;
  }

  bool read_profile(const YAML::Node& node, const std::string& path, Profile* out) {
    Fields fields, node_level, gpu_level, topology, filter;
    const Field* f = nullptr;
    if (!read_map(node, node.Mark(), path, &kProfileKeys, false, &fields)) return false;

    if (!require(fields, "name", node.Mark(), path, &f) ||
        !read_string(f->value, f->mark(), f->path, &out->name)) {
      return false;
    }
    if (!valid_profile_name(out->name)) {
      return fail(f->mark(), f->path,
                  "invalid profile name \"" + out->name + "\" (use lowercase letters, digits, -)");
    }

    if (!require(fields, "node", node.Mark(), path, &f) ||
        !read_map(f->value, f->mark(), f->path, &kNodeKeys, true, &node_level) ||
        !read_strategies(node_level, f->mark(), f->path, &out->node)) {
      return false;
    }

    if (!require(fields, "gpu", node.Mark(), path, &f) ||
        !read_map(f->value, f->mark(), f->path, &kGpuKeys, true, &gpu_level) ||
        !read_strategies(gpu_level, f->mark(), f->path, &out->gpu)) {
      return false;
    }
    if (const Field* w = find_field(gpu_level, "weight")) {
      if (!read_number(*w, 0, true, &out->gpu_weight)) return false;
    }

    if ((f = find_field(fields, "topology"))) {
      if (!read_map(f->value, f->mark(), f->path, &kTopologyKeys, true, &topology)) return false;
      if (const Field* w = find_field(topology, "weight")) {
        if (!read_number(*w, 0, true, &out->topology_weight)) return false;
      }
    }

    if ((f = find_field(fields, "filter"))) {
      if (!read_map(f->value, f->mark(), f->path, &kFilterKeys, true, &filter)) return false;
      if (const Field* k = find_field(filter, "keepBest")) {
        double v = 0;
        if (!read_number(*k, 0, true, &v)) return false;
        if (v != static_cast<double>(static_cast<int>(v)) || v > 100000) {
          return fail(k->mark(), k->path,
                      "must be a whole number of nodes (0: keep all), got " + k->value.Scalar());
        }
        out->keep_best = static_cast<int>(v);
      }
    }

    if ((f = find_field(fields, "drain")) && !read_drain(*f, out)) return false;
    if ((f = find_field(fields, "select")) && !read_selector(*f, &out->select)) return false;
    return true;
  }

  // drain: {minGpus: N}: pods asking N or more whole GPUs that fit no node hold a node to drain.
  bool read_drain(const Field& f, Profile* out) {
    Fields drain;
    if (!read_map(f.value, f.mark(), f.path, &kDrainKeys, true, &drain)) return false;
    if (const Field* k = find_field(drain, "minGpus")) {
      double v = 0;
      if (!read_number(*k, 0, true, &v)) return false;
      if (v != static_cast<double>(static_cast<int>(v)) || v > 1024) {
        return fail(k->mark(), k->path,
                    "must be a whole number of GPUs (0: never drain), got " + k->value.Scalar());
      }
      out->drain_min_gpus = static_cast<int>(v);
    }
    return true;
  }

  bool read_policy(const YAML::Node& root, Policy* out) {
    Fields fields;
    const Field* f = nullptr;
    if (!read_map(root, root.Mark(), "", &kPolicyKeys, false, &fields)) return false;

    if (!require(fields, "version", root.Mark(), "", &f)) return false;
    if (!f->value.IsScalar()) {
      return fail(f->mark(), f->path, "expected 1, got " + describe(f->value));
    }
    if (f->value.Scalar() != "1") {
      return fail(f->mark(), f->path,
                  "unsupported version " + describe(f->value) + " (supported: 1)");
    }

    if (!require(fields, "profiles", root.Mark(), "", &f)) return false;
    const YAML::Node& list = f->value;
    if (!list.IsSequence()) {
      return fail(f->mark(), f->path, "expected a list of profiles, got " + describe(list));
    }
    if (list.size() == 0) return fail(f->mark(), f->path, "must define at least one profile");
    std::map<std::string, std::size_t> seen;  // profile name -> index
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string path = "profiles[" + std::to_string(i) + "]";
      Profile p;
      if (!read_profile(list[i], path, &p)) return false;
      const auto [it, inserted] = seen.emplace(p.name, i);
      if (!inserted) {
        return fail(list[i]["name"].Mark(), path + ".name",
                    "duplicate profile name \"" + p.name + "\" (also profiles[" +
                        std::to_string(it->second) + "])");
      }
      out->profiles.push_back(std::move(p));
    }

    if (!require(fields, "default", root.Mark(), "", &f) ||
        !read_string(f->value, f->mark(), f->path, &out->default_profile)) {
      return false;
    }
    if (!seen.count(out->default_profile)) {
      std::vector<std::string> names;
      for (const Profile& p : out->profiles) names.push_back(p.name);
      return fail(
          f->mark(), f->path,
          "no profile named \"" + out->default_profile + "\" (profiles: " + join(names) + ")");
    }
    if ((f = find_field(fields, "consolidation")) &&
        !detail::read_consolidation(*this, *f, &out->consolidation)) {
      return false;
    }
    f = find_field(fields, "quotas");
    return f == nullptr || detail::read_quotas(*this, *f, &out->quotas);
  }
};

}  // namespace

Result<Policy> parse_policy(const std::string& yaml_text, const std::string& source_name) {
  try {
    const std::vector<YAML::Node> docs = yaml::load_all(yaml_text);
    if (docs.empty() || docs[0].IsNull()) {
      return Error{source_name + ":1: (root): empty policy; expected keys " + join(kPolicyKeys)};
    }
    if (docs.size() > 1) {
      return Error{location(source_name, docs[1].Mark()) +
                   "(root): more than one YAML document; a policy file holds exactly one"};
    }
    Policy policy;
    policy.source = source_name;
    PolicyReader reader(source_name);
    if (!reader.read_policy(docs[0], &policy)) return Error{reader.error()};
    return policy;
  } catch (const YAML::Exception& e) {
    // Errors found at end of input are marked on the line after the last one; clamp.
    YAML::Mark mark = e.mark;
    const auto lines = std::count(yaml_text.begin(), yaml_text.end(), '\n') +
                       (!yaml_text.empty() && yaml_text.back() != '\n' ? 1 : 0);
    if (!mark.is_null() && mark.line >= lines) mark.line = std::max<int>(0, lines - 1);
    return Error{location(source_name, mark) + "invalid YAML: " + e.msg};
  } catch (const std::exception& e) {
    return Error{source_name + ":1: cannot parse policy: " + e.what()};
  }
}

namespace {
struct FileCloser {
  int fd;
  ~FileCloser() { ::close(fd); }
};
}  // namespace

Result<std::string> read_policy_text(const std::string& path) {
  auto fail = [&](const std::string& why) {
    return Error{path + ": cannot read policy file: " + why};
  };
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return fail(std::strerror(errno));
  const FileCloser closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return fail(std::strerror(errno));
  // Only a regular file can be read without blocking (a FIFO, socket or device may never end).
  if (S_ISDIR(st.st_mode)) return fail("is a directory");
  if (!S_ISREG(st.st_mode)) return fail("not a regular file (a FIFO, socket or device?)");
  if (st.st_size > kMaxPolicyBytes) {
    return fail("larger than " + std::to_string(kMaxPolicyBytes) + " bytes");
  }
  std::string text;
  std::array<char, 8192> buf{};
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(std::strerror(errno));
    if (n == 0) return text;
    text.append(buf.data(), static_cast<std::size_t>(n));
    if (text.size() > kMaxPolicyBytes) {
      return fail("larger than " + std::to_string(kMaxPolicyBytes) + " bytes");
    }
  }
}

Result<Policy> load_policy_file(const std::string& path) {
  auto text = read_policy_text(path);
  if (!text) return Error{text.error()};
  return parse_policy(*text, path);
}

}  // namespace gapless::policy
