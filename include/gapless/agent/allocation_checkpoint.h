// What the device plugin has allocated, per container, kept in a JSON file so that a restarted
// plugin still knows which containers it already served: a pod stays Pending for a while after its
// Allocate, and without this it would be matched again for the next pod of the same size.
//
// {"v":1,"containers":[{"uid":"..","namespace":"..","name":"..","container":"..",
//   "devices":["GPU-.."]}]}
//
// Written whole to a temporary file and renamed, so a crash leaves the old or the new file.
// It lives in a subdirectory of the plugin dir (device_plugin.h): a restarting kubelet deletes
// files there (every file but its own checkpoint in some versions, only sockets in newer ones)
// but never a directory.
// Thread-safety: none; the plugin serialises Allocate calls.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "gapless/model/result.h"

namespace gapless::agent {

struct CheckpointEntry {
  std::string pod_uid, pod_ns, pod_name, container;
  std::vector<std::string> devices;  // GPU UUIDs handed to the container
  bool operator==(const CheckpointEntry&) const = default;
};

class AllocationCheckpoint {
 public:
  explicit AllocationCheckpoint(std::string path) : path_(std::move(path)) {}

  // Reads the file. A missing file is an empty checkpoint; an unreadable or malformed one is an
  // error and leaves this checkpoint empty (the caller logs it and goes on).
  Status load();
  // Writes the file. Errors: it cannot be written.
  Status save() const;

  bool contains(const std::string& pod_uid, const std::string& container) const;
  void add(CheckpointEntry entry);
  // Drops the entries of pods not in `live_uids` (deleted pods). True when something changed.
  bool retain(const std::set<std::string>& live_uids);
  const std::vector<CheckpointEntry>& entries() const { return entries_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<CheckpointEntry> entries_;
};

}  // namespace gapless::agent
