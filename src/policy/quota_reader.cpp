#include "quota_reader.h"

#include "selector_reader.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "gapless/model/gpu.h"

namespace gapless::policy::detail {
namespace {

using placement::Quota;
using placement::QuotaLimits;
using placement::QuotaResource;

const Keys kQuotaKeys = {"name", "namespaces", "namespaceSelector", "scope", "limits", "models"};

struct LimitKey {
  std::string_view key;
  QuotaResource resource;
};
const LimitKey kLimitKeys[] = {{"wholeGpus", QuotaResource::kWholeGpus},
                               {"gpuMemoryMiB", QuotaResource::kVramMib},
                               {"gpuComputeMilli", QuotaResource::kComputeMilli},
                               {"migComputeSlices", QuotaResource::kMigSlices}};
const Keys kAllLimits = {"wholeGpus", "gpuMemoryMiB", "gpuComputeMilli", "migComputeSlices",
                         "wholeGpusPercent"};
const Keys kModelLimits = {"wholeGpus", "gpuMemoryMiB", "gpuComputeMilli", "migComputeSlices"};

// Quota names are metric label values and appear in reasons: keep them plain.
bool valid_name(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

bool read_count(YamlReader& r, const Field& f, std::int64_t* out) {
  double v = 0;
  if (!r.read_number(f, 0, true, &v)) return false;
  // Whole numbers only, and small enough that sums of usage never overflow.
  if (v != std::floor(v) || v > 1e15) {
    return r.fail(f.mark(), f.path,
                  "expected a whole number of at most 10^15, got " + f.value.Scalar());
  }
  *out = static_cast<std::int64_t>(v);
  return true;
}

bool read_limits(YamlReader& r, const Field& f, const Keys& allowed, QuotaLimits* out,
                 std::optional<double>* percent) {
  Fields fields;
  if (!r.read_map(f.value, f.mark(), f.path, &allowed, false, &fields)) return false;
  for (const Field& l : fields) {
    if (l.key == "wholeGpusPercent") {
      double v = 0;
      if (!r.read_number(l, 0, true, &v)) return false;
      if (v > 100) return r.fail(l.mark(), l.path, "must be <= 100, got " + l.value.Scalar());
      *percent = v;
      continue;
    }
    for (const LimitKey& k : kLimitKeys) {
      if (l.key != k.key) continue;
      std::int64_t v = 0;
      if (!read_count(r, l, &v)) return false;
      (*out)[k.resource] = v;
    }
  }
  if (fields.empty()) {
    return r.fail(f.mark(), f.path, "set at least one limit (" + join(allowed) + ")");
  }
  return true;
}

bool read_models(YamlReader& r, const Field& f, Quota* q) {
  Fields models;
  if (!r.read_map(f.value, f.mark(), f.path, nullptr, false, &models)) return false;
  if (models.empty()) return r.fail(f.mark(), f.path, "name at least one GPU model");
  std::set<std::string> seen;  // models match case-insensitively, so must differ so too
  for (const Field& m : models) {
    if (m.key.empty()) return r.fail(m.key_node.Mark(), m.path, "GPU model must not be empty");
    if (!seen.insert(model::model_key(m.key)).second) {
      return r.fail(m.key_node.Mark(), m.path, "GPU model named twice (case does not matter)");
    }
    if (!read_limits(r, m, kModelLimits, &q->per_model[m.key], nullptr)) return false;
  }
  return true;
}

// Who the quota is for: `namespaces`, `namespaceSelector`, or both (the union).
bool read_tenant(YamlReader& r, const Fields& fields, const YAML::Node& node,
                 const std::string& path, Quota* q) {
  const Field* listed = find_field(fields, "namespaces");
  const Field* selector = find_field(fields, "namespaceSelector");
  if (listed == nullptr && selector == nullptr) {
    return r.fail(node.Mark(), path, "set namespaces, namespaceSelector, or both");
  }
  if (listed != nullptr) {
    if (!r.read_string_list(*listed, &q->namespaces)) return false;
    if (q->namespaces.empty()) {
      return r.fail(listed->mark(), listed->path, "name at least one namespace");
    }
  }
  if (selector == nullptr) return true;
  return read_label_selector(r, *selector, &q->namespace_selector.emplace());
}

bool read_quota(YamlReader& r, const YAML::Node& node, const std::string& path, Quota* q) {
  Fields fields;
  const Field* f = nullptr;
  if (!r.read_map(node, node.Mark(), path, &kQuotaKeys, false, &fields)) return false;
  if (!r.require(fields, "name", node.Mark(), path, &f) ||
      !r.read_string(f->value, f->mark(), f->path, &q->name)) {
    return false;
  }
  if (!valid_name(q->name)) {
    return r.fail(f->mark(), f->path,
                  "invalid quota name \"" + q->name + "\" (use lowercase letters, digits, -)");
  }
  if (!read_tenant(r, fields, node, path, q)) return false;
  if ((f = find_field(fields, "scope"))) {
    std::string scope;
    if (!r.read_string(f->value, f->mark(), f->path, &scope)) return false;
    if (scope != "shared" && scope != "each") {
      return r.fail(f->mark(), f->path,
                    "unknown scope \"" + scope +
                        "\" (shared: one budget for all the namespaces; "
                        "each: the limits for every namespace alone)");
    }
    q->each = scope == "each";
  }
  const Field* limits = find_field(fields, "limits");
  const Field* models = find_field(fields, "models");
  if (limits == nullptr && models == nullptr) {
    return r.fail(node.Mark(), path, "set limits, models, or both");
  }
  if (limits && !read_limits(r, *limits, kAllLimits, &q->limits, &q->whole_gpus_percent)) {
    return false;
  }
  return models == nullptr || read_models(r, *models, q);
}

}  // namespace

bool read_quotas(YamlReader& r, const Field& f, std::vector<Quota>* out) {
  if (f.value.IsNull()) return true;
  if (!f.value.IsSequence()) {
    return r.fail(f.mark(), f.path, "expected a list of quotas, got " + describe(f.value));
  }
  std::map<std::string, std::size_t> seen;
  for (std::size_t i = 0; i < f.value.size(); ++i) {
    const std::string path = "quotas[" + std::to_string(i) + "]";
    Quota q;
    if (!read_quota(r, f.value[i], path, &q)) return false;
    const auto [it, inserted] = seen.emplace(q.name, i);
    if (!inserted) {
      return r.fail(f.value[i]["name"].Mark(), path + ".name",
                    "duplicate quota name \"" + q.name + "\" (also quotas[" +
                        std::to_string(it->second) + "])");
    }
    out->push_back(std::move(q));
  }
  return true;
}

}  // namespace gapless::policy::detail
