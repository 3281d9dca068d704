#include "trace.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace gapless::bench {
namespace {

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = line.find(sep, start);
    out.push_back(line.substr(start, end - start));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

// Walks the rows of one CSV text, finding columns by header name.
class Csv {
 public:
  Csv(const std::string& text, std::string source) : in_(text), source_(std::move(source)) {}

  // Reads the header; fails unless every required column is present.
  bool header(const std::vector<std::string>& required) {
    std::string line;
    if (!next_line(&line)) return fail("empty file; expected a header row");
    const std::vector<std::string> names = split(line, ',');
    for (std::size_t i = 0; i < names.size(); ++i) columns_[names[i]] = i;
    width_ = names.size();
    for (const std::string& r : required) {
      if (!columns_.count(r)) return fail("header lacks column \"" + r + "\"");
    }
    return true;
  }

  // Next data row; false at the end (error() empty) or on a malformed row.
  bool row() {
    std::string line;
    do {
      if (!next_line(&line)) return false;
    } while (line.empty());
    fields_ = split(line, ',');
    if (fields_.size() != width_) {
      return fail("expected " + std::to_string(width_) + " fields, got " +
                  std::to_string(fields_.size()));
    }
    return true;
  }

  bool has(const std::string& column) const { return columns_.count(column) != 0; }
  const std::string& text(const std::string& column) const { return fields_[columns_.at(column)]; }

  bool integer(const std::string& column, std::int64_t lo, std::int64_t hi, std::int64_t* out) {
    const std::string& s = text(column);
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size()) {
      return fail("column " + column + ": expected an integer, got \"" + s + "\"");
    }
    if (*out < lo || *out > hi) {
      return fail("column " + column + ": " + s + " is outside " + std::to_string(lo) + ".." +
                  std::to_string(hi));
    }
    return true;
  }

  bool fail(const std::string& what) {
    error_ = source_ + ":" + std::to_string(std::max(line_, 1)) + ": " + what;
    return false;
  }
  const std::string& error() const { return error_; }

 private:
  bool next_line(std::string* line) {
    if (!std::getline(in_, *line)) return false;
    ++line_;
    if (!line->empty() && line->back() == '\r') line->pop_back();
    return true;
  }

  std::istringstream in_;
  std::string source_;
  std::map<std::string, std::size_t> columns_;
  std::size_t width_ = 0;
  std::vector<std::string> fields_;
  int line_ = 0;
  std::string error_;
};

constexpr std::int64_t kMaxInt = 1LL << 40;

Result<std::string> read_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return Error{path + ": is a directory"};
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{path + ": cannot read"};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

Result<std::vector<TraceNode>> parse_nodes(const std::string& text, const std::string& source) {
  Csv csv(text, source);
  if (!csv.header({"sn", "cpu_milli", "memory_mib", "gpu", "model"})) return Error{csv.error()};
  std::vector<TraceNode> out;
  while (csv.row()) {
    TraceNode n;
    std::int64_t gpus = 0;
    n.name = csv.text("sn");
    if (n.name.empty()) {
      csv.fail("column sn: empty node name");
      return Error{csv.error()};
    }
    if (!csv.integer("cpu_milli", 0, kMaxInt, &n.cpu_milli) ||
        !csv.integer("memory_mib", 0, kMaxInt, &n.memory_mib) ||
        !csv.integer("gpu", 0, model::LinkGraph::kMaxGpus, &gpus)) {
      return Error{csv.error()};
    }
    n.gpus = static_cast<int>(gpus);
    n.model = csv.text("model");
    out.push_back(std::move(n));
  }
  if (!csv.error().empty()) return Error{csv.error()};
  return out;
}

Result<std::vector<TracePod>> parse_pods(const std::string& text, const std::string& source) {
  Csv csv(text, source);
  if (!csv.header({"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"})) {
    return Error{csv.error()};
  }
  std::vector<TracePod> out;
  while (csv.row()) {
    TracePod p;
    std::int64_t num_gpu = 0, gpu_milli = 0;
    p.name = csv.text("name");
    if (!csv.integer("cpu_milli", 0, kMaxInt, &p.cpu_milli) ||
        !csv.integer("memory_mib", 0, kMaxInt, &p.memory_mib) ||
        !csv.integer("num_gpu", 0, model::LinkGraph::kMaxGpus, &num_gpu) ||
        !csv.integer("gpu_milli", 0, model::kFullComputeMilli, &gpu_milli)) {
      return Error{csv.error()};
    }
    if ((num_gpu == 0) != (gpu_milli == 0)) {
      csv.fail("num_gpu " + std::to_string(num_gpu) + " with gpu_milli " +
               std::to_string(gpu_milli) + ": a pod asks GPUs in both columns or in neither");
      return Error{csv.error()};
    }
    if (num_gpu > 1 && gpu_milli < model::kFullComputeMilli) {
      csv.fail("a share (gpu_milli " + std::to_string(gpu_milli) + ") spans one GPU, not " +
               std::to_string(num_gpu));
      return Error{csv.error()};
    }
    p.num_gpu = static_cast<int>(num_gpu);
    p.gpu_milli = static_cast<int>(gpu_milli);
    // Both time columns or neither; a pod cannot leave before it was created.
    if (csv.has("creation_time") && csv.has("deletion_time")) {
      if (!csv.integer("creation_time", 0, kMaxInt, &p.creation_time) ||
          !csv.integer("deletion_time", 0, kMaxInt, &p.deletion_time)) {
        return Error{csv.error()};
      }
      if (p.deletion_time < p.creation_time) {
        csv.fail("deletion_time " + std::to_string(p.deletion_time) + " is before creation_time " +
                 std::to_string(p.creation_time));
        return Error{csv.error()};
      }
    }
    if (csv.has("gpu_spec") && p.num_gpu > 0) {
      for (std::string& m : split(csv.text("gpu_spec"), '|')) {
        if (!m.empty()) p.gpu_spec.push_back(std::move(m));
      }
    }
    out.push_back(std::move(p));
  }
  if (!csv.error().empty()) return Error{csv.error()};
  return out;
}

Result<std::vector<TraceNode>> load_nodes(const std::string& path) {
  auto text = read_file(path);
  if (!text) return Error{text.error()};
  return parse_nodes(*text, path);
}

Result<std::vector<TracePod>> load_pods(const std::string& path) {
  auto text = read_file(path);
  if (!text) return Error{text.error()};
  return parse_pods(*text, path);
}

model::Node to_node(const TraceNode& n) {
  model::Node node;
  node.name = n.name;
  node.source = model::InventorySource::kFeatureDiscovery;
  for (int i = 0; i < n.gpus; ++i) {
    model::Gpu g;
    g.index = i;
    g.model = n.model;
    node.gpus.push_back(std::move(g));
  }
  node.links = model::LinkGraph(n.gpus);
  node.host = {n.cpu_milli, n.memory_mib};
  return node;
}

model::GpuRequest to_request(const TracePod& p) {
  model::GpuRequest r;
  r.host = {p.cpu_milli, p.memory_mib};
  if (p.num_gpu == 0) return r;
  r.models = p.gpu_spec;
  if (p.num_gpu == 1 && p.gpu_milli < model::kFullComputeMilli) {
    r.kind = model::RequestKind::kShared;
    r.shared = {0, p.gpu_milli, 1};
  } else {
    r.kind = model::RequestKind::kWhole;
    r.whole = p.num_gpu;
  }
  return r;
}

std::string trace_name(const std::string& path) {
  std::string stem = std::filesystem::path(path).filename().string();
  if (stem.size() > 4 && stem.ends_with(".csv")) stem.resize(stem.size() - 4);
  const std::string prefix = "openb_pod_list_";
  if (stem.starts_with(prefix) && stem.size() > prefix.size()) stem = stem.substr(prefix.size());
  return stem;
}

}  // namespace gapless::bench
