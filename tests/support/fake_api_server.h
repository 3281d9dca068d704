// A fake Kubernetes API server for tests: an in-memory store of Nodes and Pods served over HTTP
// on 127.0.0.1 (an ephemeral port), with the request and response shapes of the real API server
// for everything Gapless uses (extender-protocol.md §4):
//
//   GET  /api/v1/nodes, /api/v1/pods, /api/v1/namespaces/{ns}/pods       list or watch
//   GET  /api/v1/namespaces, /apis/policy/v1/poddisruptionbudgets,
//        /apis/policy/v1/namespaces/{ns}/poddisruptionbudgets            list or watch
//   GET  /api/v1/nodes/{name}, /api/v1/namespaces/{ns}/pods/{name}       one object (404 Status)
//   POST /api/v1/namespaces/{ns}/pods/{name}/binding                     bind (201 Status)
//   PATCH /api/v1/nodes/{name}, /api/v1/namespaces/{ns}/pods/{name}    JSON merge patch
//                                    (application/merge-patch+json; 415 for other patch
//                                    types), 200 with the object (MODIFIED)
//   POST /api/v1/namespaces/{ns}/pods/{name}/eviction                    policy/v1 Eviction, UID
//                                    precondition (409), ?dryRun=All; no PodDisruptionBudget
//                                    check (fail_next 429 stands for one); a real one sets
//                                    metadata.deletionTimestamp (MODIFIED) and keeps the pod
//   POST /api/v1/namespaces/{ns}/events, /apis/events.k8s.io/v1/namespaces/{ns}/events
//   GET, PUT /api/v1/namespaces/{ns}/configmaps/{name}; POST /api/v1/namespaces/{ns}/configmaps
//                                    create (409 AlreadyExists) and update, with a set
//                                    metadata.resourceVersion as a precondition (409 Conflict);
//                                    ConfigMaps are not listed or watched
//   GET  /apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}  a Lease set_lease stored
//
// Lists: `{"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"RV"},"items":[..]}`
// with items sorted by key (name, or namespace/name) and without kind/apiVersion, as the real
// server sends them. `limit` + `continue` chunk the list; every chunk comes from a snapshot taken
// at the first one and carries its resourceVersion (`remainingItemCount` is set when no selector
// was given). An unknown or expired continue token answers 410 Expired.
// `fieldSelector`: `f=v`, `f==v`, `f!=v`, comma-separated (AND), on the fields Kubernetes allows
// (pods: metadata.name/namespace, spec.nodeName/schedulerName/restartPolicy/serviceAccountName/
// hostNetwork, status.phase/podIP/nominatedNodeName; nodes: metadata.name, spec.unschedulable;
// namespaces: metadata.name, status.phase; PDBs: metadata.name/namespace);
// a missing field reads as "", so `spec.nodeName!=` means "bound". Other fields answer 400.
// `labelSelector` is not supported (ignored).
//
// Watches (`?watch=1&resourceVersion=RV&allowWatchBookmarks=true&timeoutSeconds=N`): a chunked
// 200 stream of `{"type":..,"object":..}\n` events, objects with kind/apiVersion, starting after
// RV. Without RV (or RV "0") the stream opens with an ADDED event per current object. With a
// field selector, an object that stops matching arrives as DELETED and one that starts matching
// as ADDED (what the watch cache does). The stream ends after timeoutSeconds, on close_watches()
// and when the server stops. An RV older than the history kept (expire_history_before, compact)
// gets 410 Expired, as an in-stream ERROR event (default) or as the HTTP status (ExpiryForm). An
// open watch whose next event was dropped from the history gets the ERROR event and ends.
// A watch whose client went away is only noticed at its next write (event or bookmark).
//
// resourceVersions are decimal strings of one global counter; every change of a stored object
// (test hooks or binding) takes the next one and is recorded as a watch event.
//
// Every request to a route above is logged, checked against the bearer token when one is set
// (401 Status otherwise), then against injected faults, then served. Other paths answer a 404
// Status and are not logged. Every non-2xx answer is a v1 Status object.
//
// Constructing one ignores SIGPIPE in the process (a watch written to after its client left).
//
// Thread-safe: test hooks may run concurrently with requests and with each other. Test hooks
// that misuse the store (adding an existing object, changing a missing one) throw
// std::logic_error.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "gapless/k8s/api_client.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace gapless::test {

class FakeApiServer {
 public:
  enum class ExpiryForm {
    kErrorEvent,  // 200, then {"type":"ERROR","object":<Status 410 Expired>} and the end
    kHttpStatus,  // the watch request itself answers 410 with the Status
  };

  struct RequestRecord {
    std::string method;
    std::string path;    // without the query
    std::string target;  // path and query, as sent
    std::string body;
    std::string authorization;  // the Authorization header, as sent
    int remote_port = 0;        // the client's: one per connection
  };

  // Starts serving at once. `token`: the bearer token to require; "" accepts any request.
  explicit FakeApiServer(std::string token = "");
  ~FakeApiServer();  // ends open watches, then stops
  FakeApiServer(const FakeApiServer&) = delete;
  FakeApiServer& operator=(const FakeApiServer&) = delete;

  int port() const { return port_; }
  std::string url() const;  // "http://127.0.0.1:<port>"
  // server = url(), token = the current token, timeout 5 s.
  k8s::ClientConfig client_config() const;

  // --- Objects. Hooks return the resourceVersion of the change. A missing metadata.uid is set
  // ("uid-<name>-<n>"), a pod without namespace goes to "default", kind/apiVersion are set.

  // Replaces the whole store without emitting events, as if these objects had existed before
  // any watch: all get the returned resourceVersion, and watches from an older one get 410
  // (open ones included). Use it to set up large clusters: 5,000 nodes and 50,000 small pods
  // take about a second in a Debug build, and lists of them are served in milliseconds.
  std::string load(const std::vector<nlohmann::json>& nodes,
                   const std::vector<nlohmann::json>& pods);

  std::string add_node(nlohmann::json node);      // ADDED
  std::string replace_node(nlohmann::json node);  // MODIFIED: the whole object, by name
  std::string update_node(const std::string& name,
                          const std::function<void(nlohmann::json&)>& change);  // MODIFIED
  std::string delete_node(const std::string& name);                             // DELETED

  std::string add_pod(nlohmann::json pod);
  std::string replace_pod(nlohmann::json pod);
  std::string update_pod(const std::string& ns, const std::string& name,
                         const std::function<void(nlohmann::json&)>& change);
  std::string delete_pod(const std::string& ns, const std::string& name);

  // Namespaces (v1, cluster-scoped) and PodDisruptionBudgets (policy/v1): listed and watched
  // like nodes and pods; only these hooks change them (the fake serves no writes for them).
  std::string add_namespace(nlohmann::json ns);
  std::string update_namespace(const std::string& name,
                               const std::function<void(nlohmann::json&)>& change);
  std::string delete_namespace(const std::string& name);
  std::string add_pdb(nlohmann::json pdb);
  std::string update_pdb(const std::string& ns, const std::string& name,
                         const std::function<void(nlohmann::json&)>& change);
  std::string delete_pdb(const std::string& ns, const std::string& name);

  // Binds as POST .../binding does (same checks, MODIFIED event); returns the HTTP status the
  // endpoint would answer (201, 404, 409, ...).
  int bind_pod(const std::string& ns, const std::string& name, const std::string& node,
               const std::map<std::string, std::string>& annotations = {},
               const std::string& uid = "");

  // Stores the Lease ns/name with spec.holderIdentity `holder` (kube-scheduler's leader lease);
  // only GET serves it.
  void set_lease(const std::string& ns, const std::string& name, const std::string& holder);

  std::optional<nlohmann::json> node(const std::string& name) const;
  std::optional<nlohmann::json> pod(const std::string& ns, const std::string& name) const;
  std::optional<nlohmann::json> config_map(const std::string& ns, const std::string& name) const;
  std::size_t config_map_writes() const;  // successful creates and updates
  std::size_t node_count() const;
  std::size_t pod_count() const;
  std::string resource_version() const;  // the latest change's

  // --- Watches.
  // Every open watch that asked for bookmarks gets a BOOKMARK at the current resourceVersion
  // (after the events before it): `{"kind":"Node","apiVersion":"v1","metadata":
  // {"resourceVersion":"RV"}}`.
  void send_bookmark();
  // Ends every open watch: cleanly (the changes made before this call are still delivered, then
  // the chunked body ends and the client sees status 200), or abruptly (the connection drops
  // mid-stream at once, the client sees a read error). Watches opened later are not affected.
  void close_watches(bool abrupt = false);
  // Drops the history up to and including `rv`: a watch from an RV below `rv` gets 410, and so
  // does an open watch that had not yet delivered a dropped change. Continue tokens expire.
  void expire_history_before(const std::string& rv);
  void compact();  // expire_history_before(resource_version()): only a watch from now works
  // Every open watch gets the ERROR 410 event (whatever the ExpiryForm) and ends.
  void expire_open_watches();
  void set_expiry_form(ExpiryForm form);
  void expire_continue_tokens();  // later pages of chunked lists get 410
  // Watches being served, not counting those already told to end (close_watches,
  // expire_open_watches) that have not finished yet.
  std::size_t open_watches() const;
  // Waits until at least n watches are open (as open_watches counts); false on timeout.
  bool wait_for_watches(std::size_t n,
                        std::chrono::milliseconds timeout = std::chrono::seconds(5)) const;

  // --- Authentication. "" accepts any request.
  void set_token(std::string token);

  // --- Faults. The next `count` requests with this method whose path starts with
  // `path_prefix` (e.g. "POST", "/api/v1/namespaces/ml/pods/p/binding", or "GET",
  // "/api/v1/pods" for pod lists and watches alike) answer `status` with a Status object
  // carrying `message`, instead of being served. Faults apply after the token check (a 401
  // consumes none). A request consumes at most one fail_next and one delay_next, the oldest
  // matching ones; the delay comes first.
  void fail_next(const std::string& method, const std::string& path_prefix, int count,
                 int status = 500, const std::string& message = "injected failure");
  // The next `count` matching requests wait `delay` before they are handled.
  void delay_next(const std::string& method, const std::string& path_prefix, int count,
                  std::chrono::milliseconds delay);

  // The next `count` matching requests wait, before they are handled (and before any
  // fail_next or delay_next they match), until release_held() or the server stops: a request
  // "in flight" for as long as a test needs (an old leader's Binding landing late).
  void hold_next(const std::string& method, const std::string& path_prefix, int count);
  void release_held();                // lets every request held now go on
  std::size_t held_requests() const;  // requests waiting now

  // --- Inspection.
  std::vector<RequestRecord> requests() const;
  std::size_t count_requests(const std::string& method, const std::string& path_prefix) const;
  std::vector<nlohmann::json> events() const;    // Event objects POSTed, as stored
  std::vector<nlohmann::json> bindings() const;  // Binding bodies that succeeded
  std::vector<std::string> evictions() const;    // "ns/name" of the evictions done (no dry runs)
  void clear_log();                              // forgets requests, events and bindings

 private:
  struct Entry;
  struct HistoryEvent;
  struct Watch;
  struct Snapshot;
  struct Fault;
  struct KindInfo;
  enum class Kind { kNode, kPod, kNamespace, kPdb };
  // Kind, list kind, apiVersion, scope and selectable fields of each kind.
  static const KindInfo& info(Kind kind);
  using EntryPtr = std::shared_ptr<const Entry>;
  using Store = std::map<std::string, EntryPtr>;

  // Routes.
  void handle_list_or_watch(Kind kind, const std::string& ns, const httplib::Request& req,
                            httplib::Response& res);
  void handle_list(Kind kind, const std::string& ns, const httplib::Request& req,
                   httplib::Response& res);
  void handle_watch(Kind kind, const std::string& ns, const httplib::Request& req,
                    httplib::Response& res);
  void handle_binding(const httplib::Request& req, httplib::Response& res);
  void handle_event(const httplib::Request& req, httplib::Response& res);
  void handle_node_patch(const httplib::Request& req, httplib::Response& res);
  void handle_pod_patch(const httplib::Request& req, httplib::Response& res);
  // `ns` is "" for a cluster-scoped kind (nodes).
  void merge_patch(const httplib::Request& req, httplib::Response& res, Kind kind,
                   const std::string& ns, const std::string& name);
  void add_config_map_routes();
  void add_lease_routes();
  void add_eviction_routes();
  void handle_eviction(const httplib::Request& req, httplib::Response& res);
  void handle_config_map_write(const httplib::Request& req, httplib::Response& res,
                               const std::string& ns, const std::string& name);
  bool pre_route(const httplib::Request& req, httplib::Response& res);

  // Store changes; REQUIRES: mu_ held.
  std::string put_locked(Kind kind, nlohmann::json obj, const std::string& type);
  std::string remove_locked(Kind kind, const std::string& key);
  // MODIFIED with `change` applied to the stored object, which must keep its name.
  std::string change_locked(Kind kind, const std::string& key,
                            const std::function<void(nlohmann::json&)>& change);
  int bind_locked(const std::string& ns, const std::string& name, const nlohmann::json& binding,
                  nlohmann::json* status);
  EntryPtr make_entry(Kind kind, nlohmann::json obj);
  Store& store(Kind kind) { return stores_[static_cast<std::size_t>(kind)]; }
  const Store& store(Kind kind) const { return stores_[static_cast<std::size_t>(kind)]; }
  // Next chunk of a watch, or where it ends. REQUIRES: mu_ held.
  bool next_chunk_locked(Watch& w, std::string& out);
  std::size_t open_watches_locked() const;

  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;

  mutable std::mutex mu_;
  mutable std::condition_variable changed_;  // store, watches, bookmarks, stop
  std::string token_;
  std::array<Store, 4> stores_;  // by Kind
  Store& nodes_ = store(Kind::kNode);
  Store& pods_ = store(Kind::kPod);
  std::uint64_t rv_ = 100;
  std::uint64_t oldest_rv_ = 100;  // watches from below this RV are expired
  std::uint64_t uid_counter_ = 0;
  std::deque<HistoryEvent> history_;
  std::vector<std::shared_ptr<Watch>> watches_;
  std::uint64_t bookmark_generation_ = 0;
  ExpiryForm expiry_form_ = ExpiryForm::kErrorEvent;
  std::map<std::uint64_t, std::shared_ptr<const Snapshot>> snapshots_;  // by id
  std::uint64_t snapshot_counter_ = 0;
  std::vector<Fault> faults_;
  std::vector<RequestRecord> requests_;
  std::vector<nlohmann::json> events_;
  std::vector<nlohmann::json> bindings_;
  std::vector<std::string> evictions_;
  std::map<std::string, nlohmann::json> config_maps_;  // by "namespace/name"
  std::size_t config_map_writes_ = 0;
  std::map<std::string, nlohmann::json> leases_;  // by "namespace/name"
  std::uint64_t hold_generation_ = 0;  // release_held() counts up
  std::size_t held_ = 0;
  bool stopping_ = false;
};

}  // namespace gapless::test
