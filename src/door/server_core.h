// What every connection of a door shares (door.h): the event loop, the routes it borrows, the
// worker pool and the reserved probe thread, the TLS context, and the connection counts.
// Private to the door.
#pragma once

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "gapless/door/door.h"
#include "gapless/door/route_table.h"
#include "gapless/door/worker_pool.h"

namespace gapless::door {

// A connection as the registry knows it: stop() closes it unless a request of it is being
// answered (that one is answered first, with Connection: close).
class Connection {
 public:
  virtual ~Connection() = default;
  virtual void stop() = 0;  // on the loop
};

// The flag a connection limit comes from: "max_connections_per_peer" ->
// "--max-connections-per-peer".
inline std::string flag_of(const char* limit) {
  std::string flag = std::string("--") + (limit == nullptr ? "max_connections" : limit);
  for (char& c : flag) c = c == '_' ? '-' : c;
  return flag;
}

class ServerCore {
 public:
  // The debug lane's queue: debug and map requests waiting beyond it are answered 503.
  static constexpr std::size_t kDebugQueue = 16;
  // A worker route's request whose body is larger runs on the large lane, one thread: kube-
  // scheduler's bodies (node names; 5,000 nodes are ~100 KB) stay far below, and eight 15 MB
  // filters naming 1.2M nodes once held every worker for seconds while a 1-GPU filter waited.
  static constexpr std::size_t kLargeBodyBytes = std::size_t{1} << 20;
  // kube-scheduler asks one pod at a time, so a few waiting are plenty; more would be work an
  // attack leaves behind for seconds after it stops (and memory held meanwhile).
  static constexpr std::size_t kLargeQueue = 4;

  ServerCore(RouteTable& routes, const DoorOptions& options)
      : options(options),
        routes(routes),
        pool(options.workers, options.max_queue),
        probes(1, Door::kProbeQueue),
        debug(1, kDebugQueue),
        large(1, kLargeQueue) {}

  // Why a connection was admitted only for probes ("" if fully), or refused at once.
  struct Admission {
    bool admitted = false;
    const char* limit = nullptr;  // the limit it passed: "max_connections[_per_peer]", or null
  };
  Admission admit(const std::string& peer);
  void release(const std::string& peer);

  void count_cut(const char* reason) const {
    if (options.metrics != nullptr) options.metrics->count_connection_cut(reason);
  }

  void add(Connection* c, std::weak_ptr<Connection> w);
  void remove(Connection* c);
  // Closes every connection not being answered; on the loop.
  void stop_connections();

  const DoorOptions& options;

 private:
  // Before io: connections the loop still holds when it is destroyed release their counts here.
  std::mutex mu_;
  std::size_t open_ = 0;
  std::map<std::string, std::size_t> per_peer_;
  static constexpr std::size_t kClosedPerTrim = 256;  // release(): how often to ask for a trim
  std::size_t closed_ = 0;
  std::map<Connection*, std::weak_ptr<Connection>> live_;

 public:
  // Request bodies the loop holds while it reads them, counted beyond kFreeBodyBytes each: at
  // most body_allowance() in all, so 1,000 connections each sending a 16 MiB body cannot take
  // 16 GiB. Only the loop takes; a session gives back wherever it ends (its last owner may be a
  // worker), hence atomic. Before io: sessions the loop still holds give theirs back.
  static constexpr std::size_t kFreeBodyBytes = 64 * 1024;
  std::atomic<std::size_t> bodies_held{0};
  std::size_t body_allowance() const {
    return std::max<std::size_t>(std::size_t{64} << 20, 4 * options.max_body_bytes);
  }
  // The same for answers waiting to be written (clients that do not read hold them): beyond
  // kFreeBodyBytes each, at most answer_allowance() in all.
  std::atomic<std::size_t> answers_held{0};
  std::size_t answer_allowance() const {
    return std::max<std::size_t>(std::size_t{64} << 20, 4 * options.max_answer_bytes);
  }

  boost::asio::io_context io{1};
  std::optional<boost::asio::ip::tcp::acceptor> acceptor;
  std::optional<boost::asio::ssl::context> tls;
  RouteTable& routes;
  // After io: destroyed first, so a job dropped or finishing then still posts to a live loop.
  WorkerPool pool;
  WorkerPool probes;      // one reserved thread: /metrics never waits for the workers
  WorkerPool debug;       // one thread for /debug/* and /ui/*: the verbs never wait for them
  WorkerPool large;       // one thread for bodies over kLargeBodyBytes: the others never wait
  // HTTPS: the thread TLS handshakes are computed on (http_session.h): the server's signature
  // (RSA 2048: about a millisecond) is most of a connection's cost, and on the loop a flood of
  // ~400 handshakes/s kept a kept-alive filter waiting (p99 15-26 ms). The loop still does the
  // handshake's socket reads and writes; one thread, so a session's handshake steps and what
  // the loop asks of them (cancel, close) run in order, and a flood takes at most one core.
  // After io: destroyed (joined) first; handshakes it drops still find the loop's objects.
  std::optional<boost::asio::thread_pool> handshakes;
  bool stopping = false;  // on the loop
};

}  // namespace gapless::door
