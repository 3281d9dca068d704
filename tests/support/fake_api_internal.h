// Private to the fake API server (fake_api_server.cpp, fake_api_lists.cpp): the store's entries,
// watch state, field selectors and Status objects.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "fake_api_server.h"
#include "gapless/model/result.h"

namespace gapless::test {

// One requirement of a field selector: `field=value` (equal) or `field!=value`.
struct FieldRequirement {
  std::string field;
  bool equal = true;
  std::string value;
};
using FieldSelector = std::vector<FieldRequirement>;

// Parses "a=b,c!=d"; fields not in `allowed` are errors, as on the real server.
Result<FieldSelector> parse_field_selector(const std::vector<std::string>& allowed,
                                           const std::string& text);
bool selector_matches(const FieldSelector& selector, const nlohmann::json& obj);

// A v1 Status: {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",...}.
nlohmann::json failure_status(int code, const std::string& message,
                              const nlohmann::json& details = nullptr);
nlohmann::json success_status(int code);
// The Status reason Kubernetes uses for an HTTP code ("NotFound", "Conflict", ...).
std::string status_reason(int code);
// RFC 3339 UTC, seconds: "2025-01-15T09:12:45Z".
std::string now_rfc3339();
void send_json(httplib::Response& res, int code, const nlohmann::json& body);
// obj[a][b] when it is a string; "" otherwise.
std::string string_at(const nlohmann::json& obj, const char* a, const char* b);

struct FakeApiServer::KindInfo {
  const char* kind;         // "Pod"
  const char* list_kind;    // "PodList"
  const char* api_version;  // "v1", "policy/v1"
  bool namespaced;
  std::vector<std::string> fields;  // what field selectors may name
};

struct FakeApiServer::Entry {
  Kind kind;
  std::string key;        // "name" (cluster-scoped) or "namespace/name" (namespaced)
  nlohmann::json obj;     // with kind and apiVersion
  std::string item_text;  // JSON without kind and apiVersion, as list items are sent
  // JSON with kind and apiVersion, as watch events carry objects.
  std::string full_text() const;
};

struct FakeApiServer::HistoryEvent {
  std::uint64_t rv;
  Kind kind;
  std::string type;  // ADDED, MODIFIED, DELETED
  EntryPtr object;   // the new state (DELETED: the last state, at the deletion's RV)
  EntryPtr old;      // MODIFIED: the state before
};

struct FakeApiServer::Watch {
  Kind kind;
  std::string ns;  // "" for all namespaces
  FieldSelector selector;
  bool bookmarks = false;
  std::uint64_t cursor = 0;  // every change up to this RV was considered
  std::uint64_t bookmark_generation = 0;
  std::string initial;  // synthetic ADDED events, written first
  std::chrono::steady_clock::time_point deadline;
  bool closed = false;         // close_watches() ...
  std::uint64_t close_rv = 0;  // ... when the store was at this RV
  bool abrupt = false;         // ... dropping the connection
  bool expire = false;         // expire_open_watches()

  bool wants(const Entry& e) const;  // kind, namespace and selector
};

struct FakeApiServer::Snapshot {
  std::uint64_t rv;
  bool selected;  // a field selector was given (no remainingItemCount then)
  std::vector<EntryPtr> items;
};

struct FakeApiServer::Fault {
  std::string method;
  std::string prefix;
  int count;
  int status;  // 0: a delay only
  std::string message;
  std::chrono::milliseconds delay{0};
  bool hold = false;  // hold_next: wait for release_held()
};

}  // namespace gapless::test
