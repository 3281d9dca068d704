#include "gapless/agent/allocation_checkpoint.h"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace gapless::agent {

namespace {

Result<CheckpointEntry> entry_from(const nlohmann::json& j) {
  if (!j.is_object()) return Error{"an entry is not an object"};
  CheckpointEntry e;
  for (auto [key, out] : {std::pair{"uid", &e.pod_uid}, std::pair{"namespace", &e.pod_ns},
                          std::pair{"name", &e.pod_name}, std::pair{"container", &e.container}}) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string()) return Error{std::string("an entry has no ") + key};
    *out = it->get<std::string>();
  }
  auto devices = j.find("devices");
  if (devices == j.end() || !devices->is_array()) return Error{"an entry has no devices"};
  for (const auto& d : *devices) {
    if (!d.is_string()) return Error{"a device is not a string"};
    e.devices.push_back(d.get<std::string>());
  }
  return e;
}

}  // namespace

Status AllocationCheckpoint::load() {
  entries_.clear();
  std::ifstream in(path_);
  if (!in) return {};  // never written: nothing allocated yet
  std::stringstream text;
  text << in.rdbuf();
  auto j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Error{path_ + ": not a JSON object"};
  if (j.value("v", 0) != 1) return Error{path_ + ": unknown version"};
  auto list = j.find("containers");
  if (list == j.end() || !list->is_array()) return Error{path_ + ": no containers list"};
  std::vector<CheckpointEntry> read;
  for (const auto& item : *list) {
    auto e = entry_from(item);
    if (!e.ok()) return Error{path_ + ": " + e.error()};
    read.push_back(std::move(e).value());
  }
  entries_ = std::move(read);
  return {};
}

Status AllocationCheckpoint::save() const {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& e : entries_) {
    list.push_back({{"uid", e.pod_uid},
                    {"namespace", e.pod_ns},
                    {"name", e.pod_name},
                    {"container", e.container},
                    {"devices", e.devices}});
  }
  const nlohmann::json doc = {{"v", 1}, {"containers", std::move(list)}};
  const std::string tmp = path_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << doc.dump() << '\n';
    out.flush();
    if (!out) return Error{"cannot write " + tmp};
  }
  if (std::rename(tmp.c_str(), path_.c_str()) != 0) return Error{"cannot replace " + path_};
  return {};
}

bool AllocationCheckpoint::contains(const std::string& pod_uid,
                                    const std::string& container) const {
  for (const auto& e : entries_) {
    if (e.pod_uid == pod_uid && e.container == container) return true;
  }
  return false;
}

void AllocationCheckpoint::add(CheckpointEntry entry) {
  entries_.push_back(std::move(entry));
}

bool AllocationCheckpoint::retain(const std::set<std::string>& live_uids) {
  const auto before = entries_.size();
  std::erase_if(entries_, [&](const CheckpointEntry& e) { return !live_uids.contains(e.pod_uid); });
  return entries_.size() != before;
}

}  // namespace gapless::agent
