// One connection of a door (door.h), plain (Stream = tcp::socket) or TLS
// (ssl::stream<tcp::socket>), driven by the event loop alone (but for the TLS handshake's
// computing, on the handshake thread: start_handshake): handshake, reading each request
// with Beast's parser (and head_rules.h), "100 Continue", handing the complete request to a
// worker, and writing the answer the route hands back. Every step has a deadline (one timer):
//   handshake  --request-timeout from the accept
//   idle       --read-timeout for the first byte of the next request (then closed quietly)
//   reading    --request-timeout from the first byte, and --read-timeout between bytes: 408
//   awaiting   none while a worker computes; --deferred-timeout for a deferred route (/bind)
//   writing    --write-timeout for the whole answer (a client that does not read is cut)
// Requests of one connection are answered one at a time, in order (pipelining). Private to
// the door.
#pragma once

#include <algorithm>
#include <atomic>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/stream_traits.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/write.hpp>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "gapless/door/body_budget.h"
#include "gapless/door/route_table.h"
#include "head_rules.h"
#include "server_core.h"

namespace gapless::door {

namespace session_detail {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kReadChunk = 16 * 1024;
// After an answer that closes, the rest of what the client sent is read and dropped for a
// moment: closing with unread bytes would reset the connection and could lose the answer.
constexpr std::size_t kDrainBytes = 256 * 1024;
constexpr std::chrono::seconds kDrainTime{1};

std::string path_of(beast::string_view target);
std::string request_error(const beast::error_code& ec, const DoorOptions& o, int* status);
}  // namespace session_detail

template <class Stream>
class Session : public Connection, public std::enable_shared_from_this<Session<Stream>> {
  using Clock = session_detail::Clock;
  static constexpr bool kTls = !std::is_same_v<Stream, boost::asio::ip::tcp::socket>;

 public:
  // `probe_only`: the limit this connection passed ("max_connections[_per_peer]"): it may only
  // ask the probe routes. Null: a normal connection.
  Session(ServerCore& core, Stream stream, std::string peer, const char* probe_only)
      : core_(core),
        stream_(std::move(stream)),
        peer_(std::move(peer)),
        probe_only_(probe_only),
        timer_(core.io),
        buffer_(core.options.max_header_bytes + session_detail::kReadChunk) {}
  ~Session() override {
    release_body();
    release_answer();
    note_freed_if_large();  // e.g. a large body refused unparsed: the parser goes with us
    core_.remove(this);
    core_.release(peer_);
  }

  void start() {
    core_.add(this, this->weak_from_this());
    if constexpr (kTls) {
      start_handshake();
    } else {
      next_request();
    }
  }

  void stop() override {
    if (phase_ != Phase::kAwaiting && phase_ != Phase::kWriting) close();
  }

 private:
  enum class Phase {
    kHandshake,
    kIdle,
    kReading,
    kContinue,
    kAwaiting,
    kWriting,
    kDraining,
    kClosed
  };

  auto& socket() { return boost::beast::get_lowest_layer(stream_); }

  void arm(Clock::time_point deadline) {
    deadline_ = deadline;
    expired_ = false;
    timer_.expires_at(deadline);
    timer_.async_wait([self = this->shared_from_this()](boost::beast::error_code ec) {
      if (!ec) self->on_deadline();
    });
  }

  void on_deadline() {
    if (phase_ == Phase::kClosed || Clock::now() < deadline_) return;  // re-armed meanwhile
    expired_ = true;
    if constexpr (kTls) {
      if (phase_ == Phase::kHandshake) {
        return while_handshaking([](Session& s) {
          boost::beast::error_code ignored;
          s.socket().cancel(ignored);  // the handshake ends with an error: on_handshake
        });
      }
    }
    if (phase_ == Phase::kAwaiting) {
      ++seq_;  // the late answer is dropped
      return write(core_.routes.refusal(route_, 504,
                                        "no answer within " +
                                            std::to_string(core_.options.deferred_timeout.count()) +
                                            " s (--deferred-timeout)"));
    }
    boost::beast::error_code ignored;
    socket().cancel(ignored);  // the pending read or write ends with an error: on_expired
  }

  // TLS: the handshake's steps (OpenSSL's work on what the client sent: the signature) run on
  // the handshake thread (ServerCore::handshakes), its socket reads and writes on the loop, which
  // does nothing else with the stream until on_handshake: what the loop must do to it meanwhile
  // (cancel at the deadline, close at stop) goes through while_handshaking. A handshake flood
  // then delays other handshakes, never the loop's requests and probes.
  void start_handshake() {
    phase_ = Phase::kHandshake;
    arm(Clock::now() + core_.options.request_timeout);  // from the accept
    // The loop may not run out of work while the handshake thread still has this stream: the
    // thread's next step may start a read on the loop's reactor (and at stop, a loop that
    // returned would leave that read to be destroyed after the handshake thread).
    handshake_work_.emplace(core_.io.get_executor());
    auto& thread = *core_.handshakes;
    boost::asio::post(thread, [self = this->shared_from_this(), &thread] {
      self->stream_.async_handshake(
          boost::asio::ssl::stream_base::server,
          boost::asio::bind_executor(thread, [self](boost::beast::error_code ec) {
            self->handed_to_loop_ = true;  // before the loop may touch the stream again
            boost::asio::post(self->core_.io, [self, ec] { self->on_handshake(ec); });
          }));
    });
  }

  // Runs `step` on the handshake thread, unless the handshake has already handed the stream
  // back to the loop.
  void while_handshaking(void (*step)(Session&)) {
    boost::asio::post(*core_.handshakes, [self = this->shared_from_this(), step] {
      if (!self->handed_to_loop_) step(*self);
    });
  }

  void on_handshake(boost::beast::error_code ec) {
    handshake_work_.reset();
    if (phase_ == Phase::kClosed) {  // stopped meanwhile
      boost::beast::error_code ignored;
      socket().close(ignored);
      return;
    }
    if (!ec) return next_request();
    core_.count_cut(expired_ ? "request_timeout" : "tls_handshake");
    // Not a reset: the client may have sent its request already; it reads an end of stream.
    drain_and_close();
  }

  // A read or write ended because its deadline passed.
  void on_expired() {
    if (phase_ == Phase::kReading) {
      core_.count_cut("request_timeout");
      Answer a;
      a.status = 408;
      a.content_type = "text/plain";
      a.body = "request not complete within --request-timeout or --read-timeout\n";
      a.close = true;
      return write(std::move(a));
    }
    if (phase_ == Phase::kWriting || phase_ == Phase::kContinue) core_.count_cut("write_timeout");
    close();
  }

  void next_request() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(core_.options.max_header_bytes));
    parser_->body_limit(core_.options.max_body_bytes);
    parser_->eager(true);
    scan_ = HeadScan{};
    scanned_ = 0;
    head_checked_ = false;
    route_ = Route{};
    if (buffer_.size() == 0) {
      // Give back what a large request made the buffer grow to.
      if (buffer_.capacity() > session_detail::kReadChunk) buffer_.shrink_to_fit();
      phase_ = Phase::kIdle;
      return read_some();
    }
    phase_ = Phase::kReading;  // a pipelined request is already here
    request_deadline_ = Clock::now() + core_.options.request_timeout;
    parse();
  }

  void read_some() {
    const std::size_t room = buffer_.max_size() - buffer_.size();
    if (room == 0) return refuse(431, "request head or chunk header too large");
    const auto now = Clock::now();
    arm(phase_ == Phase::kIdle ? now + core_.options.read_timeout
                               : std::min(request_deadline_, now + core_.options.read_timeout));
    stream_.async_read_some(
        buffer_.prepare(std::min(room, session_detail::kReadChunk)),
        [self = this->shared_from_this()](boost::beast::error_code ec, std::size_t n) {
          self->on_read(ec, n);
        });
  }

  void on_read(boost::beast::error_code ec, std::size_t n) {
    if (ec) return expired_ ? on_expired() : close();
    buffer_.commit(n);
    if (phase_ == Phase::kIdle) {
      phase_ = Phase::kReading;
      request_deadline_ = Clock::now() + core_.options.request_timeout;
    }
    parse();
  }

  void parse() {
    for (;;) {
      if (!scan_.done()) {
        const auto data = buffer_.data();
        const std::string_view all(static_cast<const char*>(data.data()), data.size());
        if (scanned_ < all.size()) {
          const std::string why = scan_.feed(all.substr(scanned_));
          scanned_ = all.size();
          if (!why.empty()) return refuse(400, why);
        }
      }
      boost::beast::error_code ec;
      const std::size_t used = parser_->put(buffer_.data(), ec);
      buffer_.consume(used);
      scanned_ -= std::min(scanned_, used);
      if (ec == session_detail::http::error::need_more) ec = {};
      if (ec) {
        int status = 400;
        const std::string why = session_detail::request_error(ec, core_.options, &status);
        return refuse(status, why);
      }
      if (parser_->is_header_done() && !head_checked_) {
        head_checked_ = true;
        if (!check_head() || phase_ == Phase::kContinue) return;
      }
      if (parser_->chunked() && !hold_body(parser_->get().body().size())) {
        return refuse_overloaded();
      }
      if (parser_->is_done()) return dispatch();
      if (used == 0 || buffer_.size() == 0) return read_some();
    }
  }

  // The route's answer to a request refused before it was complete (always closes).
  void refuse(int status, const std::string& why) {
    release_body();
    if (!head_checked_ && parser_) {
      const auto& head = parser_->get();
      route_ = core_.routes.find(std::string(head.method_string()),
                                 session_detail::path_of(head.target()));
    }
    write(core_.routes.refusal(route_, status, why));
  }

  // Takes from the loop's body allowance (ServerCore::bodies_held) until this request's body may
  // reach `bytes`: a declared length at once, a chunked body as it grows (by 1 MiB steps). False
  // when the allowance is spent. Bodies up to kFreeBodyBytes take nothing.
  bool hold_body(std::size_t bytes) {
    large_ = large_ || bytes > BodyBudget::kSmallBody;
    if (bytes <= ServerCore::kFreeBodyBytes || bytes <= body_held_) return true;
    constexpr std::size_t kStep = std::size_t{1} << 20;
    const std::size_t want = std::max(
        bytes, std::min(core_.options.max_body_bytes, (bytes + kStep - 1) / kStep * kStep));
    if (core_.bodies_held + (want - body_held_) > core_.body_allowance()) return false;
    core_.bodies_held += want - body_held_;
    body_held_ = want;
    return true;
  }
  // Gives the allowance back: the body went to a worker (the body budget takes over, see
  // body_budget.h) or the connection is done with it.
  void release_body() {
    core_.bodies_held -= body_held_;
    body_held_ = 0;
  }
  void release_answer() {
    core_.answers_held -= answer_held_;
    answer_held_ = 0;
  }
  // After a large request (body or answer over BodyBudget::kSmallBody) is answered, its memory
  // is free: the body budget's trimmer hands it back to the system once large ones stop (issue
  // 38: RSS was still ~200 MiB a minute after 15 MB filters, whose answers outlived the lease).
  void note_freed_if_large() {
    if (!large_) return;
    large_ = false;
    core_.routes.note_large_request_freed();
  }
  void refuse_overloaded() {
    if (core_.options.metrics != nullptr) core_.options.metrics->count_overload(route_.name);
    refuse(503, "overloaded: request bodies being read fill the allowance of " +
                    std::to_string(core_.body_allowance()) +
                    " bytes (4 x --max-body-bytes, at least 64 MiB); retry shortly");
  }

  // Decides on a request once its head is parsed; false when it answered (a refusal).
  bool check_head() {
    namespace http = session_detail::http;
    const RequestHead& head = parser_->get();
    const std::string method(head.method_string());
    const std::string path = session_detail::path_of(head.target());
    route_ = core_.routes.find(method, path);
    keep_alive_ = head.keep_alive();
    std::string why = head_problem(head, core_.options.max_headers);
    if (!why.empty()) {
      refuse(why.find("--max-headers") != std::string::npos ? 431 : 400, why);
      return false;
    }
    const auto length = parser_->content_length();
    const bool has_body = parser_->chunked() || (length && *length > 0);
    if (length && route_.takes_body && !hold_body(*length)) {
      refuse_overloaded();
      return false;
    }
    if (route_.lane == Route::Lane::kNone) {
      Answer a = core_.routes.refusal(route_, 404, "no route " + method + " " + path);
      a.close = has_body;  // a body is never read for it
      write(std::move(a));
      return false;
    }
    if (route_.takes_body && !parser_->chunked() && !length) {
      refuse(400, "request has neither Content-Length nor Transfer-Encoding: chunked");
      return false;
    }
    if (!route_.takes_body && has_body) {
      refuse(400, method + " " + path + " takes no request body");
      return false;
    }
    if (probe_only_ != nullptr && route_.lane != Route::Lane::kLoop &&
        route_.lane != Route::Lane::kProbe) {
      core_.count_cut(probe_only_);
      Answer a = core_.routes.refusal(route_, 503,
                                      "too many connections (" + flag_of(probe_only_) +
                                          "); this one may only ask /healthz, /readyz, /metrics");
      a.status = 503;  // not a verb answer: the request was never taken
      a.headers.emplace_back("Retry-After", "1");
      write(std::move(a));
      return false;
    }
    if (!parser_->is_done() && boost::beast::iequals(head[http::field::expect], "100-continue")) {
      phase_ = Phase::kContinue;
      arm(Clock::now() + core_.options.write_timeout);
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      boost::asio::async_write(
          stream_, boost::asio::buffer(kContinue),
          [self = this->shared_from_this()](boost::beast::error_code ec, std::size_t) {
            if (ec) return self->expired_ ? self->on_expired() : self->close();
            self->phase_ = Phase::kReading;
            self->parse();
          });
    }
    return true;
  }

  // Hands a complete request to where its route is answered.
  void dispatch() {
    auto& message = parser_->get();
    Request request{std::string(message.method_string()), session_detail::path_of(message.target()),
                    std::move(message.body())};
    const bool large = request.body.size() > ServerCore::kLargeBodyBytes;
    parser_.reset();
    release_body();
    if (route_.lane == Route::Lane::kLoop) return write(core_.routes.answer_now(route_));
    phase_ = Phase::kAwaiting;
    const std::uint64_t seq = ++seq_;
    if (route_.deferred) {
      arm(Clock::now() + core_.options.deferred_timeout);
    } else {
      timer_.cancel();
    }
    auto state = std::make_shared<ReplyState>(this->shared_from_this(), seq, route_.deferred);
    std::function<void()> job = [&core = core_, route = route_, request = std::move(request),
                                 state]() mutable {
      Reply reply = [state](Answer a) { state->fire(std::move(a)); };
      try {
        core.routes.handle(route, std::move(request), reply);
      } catch (const std::exception& e) {
        reply(core.routes.refusal(route, 500, std::string("internal error: ") + e.what()));
      } catch (...) {
        reply(core.routes.refusal(route, 500, "internal error"));
      }
    };
    WorkerPool& lane = route_.lane == Route::Lane::kProbe   ? core_.probes
                       : route_.lane == Route::Lane::kDebug ? core_.debug
                       : large                              ? core_.large
                                                            : core_.pool;
    if (!lane.try_submit(job)) {
      state->done = true;  // answered here instead
      write(core_.routes.overloaded(route_));
    }
  }

  // The completion a route calls exactly once, from any thread: posts the answer to the loop.
  // For an immediate route it holds the connection and keeps the loop running until the answer
  // is posted (stop() lets requests being answered finish). A deferred route may keep it for
  // ever: then it holds neither (the deferred deadline's timer holds the connection), and a
  // late call finds the connection gone or moved on. Dropped uncalled: the connection closes.
  struct ReplyState {
    ReplyState(const std::shared_ptr<Session>& s, std::uint64_t q, bool deferred)
        : weak(s), seq(q) {
      if (!deferred) {
        strong = s;
        work.emplace(s->core_.io.get_executor());
      }
    }
    ~ReplyState() {
      if (done) return;
      if (auto s = strong ? strong : weak.lock()) {
        boost::asio::post(s->core_.io, [s, q = seq] { s->abandon(q); });
      }
    }
    ReplyState(const ReplyState&) = delete;
    ReplyState& operator=(const ReplyState&) = delete;
    void fire(Answer a) {
      if (done.exchange(true)) return;
      if (auto s = strong ? strong : weak.lock()) {
        boost::asio::post(
            s->core_.io, [s, q = seq, a = std::move(a)]() mutable { s->deliver(q, std::move(a)); });
      }
    }
    std::shared_ptr<Session> strong;
    std::weak_ptr<Session> weak;
    const std::uint64_t seq;
    std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
    std::atomic<bool> done{false};
  };

  void abandon(std::uint64_t seq) {
    if (seq == seq_ && phase_ == Phase::kAwaiting) close();
  }

  void deliver(std::uint64_t seq, Answer a) {
    if (seq != seq_ || phase_ != Phase::kAwaiting) return;  // timed out meanwhile
    write(std::move(a));
  }

  void write(Answer a) {
    namespace http = session_detail::http;
    phase_ = Phase::kWriting;
    large_ = large_ || a.body.size() > BodyBudget::kSmallBody;
    if (a.body.size() > ServerCore::kFreeBodyBytes) {
      if (core_.answers_held + a.body.size() > core_.answer_allowance()) {
        if (core_.options.metrics != nullptr) core_.options.metrics->count_overload(route_.name);
        a = core_.routes.refusal(route_, 503,
                                 "overloaded: answers waiting for clients that do not read fill "
                                 "the allowance of " +
                                     std::to_string(core_.answer_allowance()) +
                                     " bytes (4 x --max-answer-bytes, at least 64 MiB); retry");
      } else {
        answer_held_ = a.body.size();
        core_.answers_held += answer_held_;
      }
    }
    const bool close_after = a.close || !keep_alive_ || core_.stopping;
    response_.emplace(static_cast<http::status>(a.status), 11);
    response_->set(http::field::content_type, a.content_type);
    for (const auto& [name, value] : a.headers) response_->set(name, value);
    response_->body() = std::move(a.body);
    response_->keep_alive(!close_after);
    response_->prepare_payload();
    arm(Clock::now() + core_.options.write_timeout);
    http::async_write(
        stream_, *response_,
        [self = this->shared_from_this(), close_after](boost::beast::error_code ec, std::size_t) {
          self->response_.reset();
          self->release_answer();
          self->note_freed_if_large();
          if (ec) return self->expired_ ? self->on_expired() : self->close();
          if (close_after || self->core_.stopping) return self->drain_and_close();
          self->next_request();
        });
  }

  // Sends our end of the stream, then reads and drops what the client still sends for a
  // moment, so that closing does not reset the connection before the answer was read.
  void drain_and_close() {
    phase_ = Phase::kDraining;
    boost::beast::error_code ignored;
    socket().shutdown(session_detail::tcp::socket::shutdown_send, ignored);
    buffer_.consume(buffer_.size());
    arm(Clock::now() + session_detail::kDrainTime);
    drain(0);
  }

  void drain(std::size_t drained) {
    if (drained > session_detail::kDrainBytes) return close();
    socket().async_read_some(
        buffer_.prepare(session_detail::kReadChunk),
        [self = this->shared_from_this(), drained](boost::beast::error_code ec, std::size_t n) {
          if (ec) return self->close();
          self->buffer_.consume(n);
          self->drain(drained + n);
        });
  }

  void close() {
    release_body();
    if (phase_ == Phase::kClosed) return;
    const bool handshaking = phase_ == Phase::kHandshake;
    phase_ = Phase::kClosed;
    timer_.cancel();
    if constexpr (kTls) {
      if (handshaking) {
        return while_handshaking([](Session& s) {
          boost::beast::error_code ignored;
          s.socket().close(ignored);
        });
      }
    }
    boost::beast::error_code ignored;
    socket().close(ignored);
  }

  ServerCore& core_;
  Stream stream_;
  const std::string peer_;
  const char* const probe_only_;
  boost::asio::steady_timer timer_;
  Clock::time_point deadline_;
  bool expired_ = false;  // the pending operation was cancelled by the deadline
  bool handed_to_loop_ = false;  // on the handshake thread: the handshake is over (TLS)
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>>
      handshake_work_;  // on the loop: from start_handshake to on_handshake
  Phase phase_ = Phase::kIdle;
  boost::beast::flat_buffer buffer_;  // at most a head (--max-header-bytes) and one read
  std::optional<session_detail::http::request_parser<session_detail::http::string_body>> parser_;
  HeadScan scan_;
  std::size_t scanned_ = 0;  // bytes of buffer_ the scan has seen
  bool head_checked_ = false;
  std::size_t body_held_ = 0;    // of ServerCore::bodies_held, for the body being read
  std::size_t answer_held_ = 0;  // of ServerCore::answers_held, for the answer being written
  bool large_ = false;  // the request being handled has a large body or answer (trim after)
  Route route_;
  bool keep_alive_ = true;
  Clock::time_point request_deadline_;
  std::uint64_t seq_ = 0;  // requests dispatched: a late answer to an older one is dropped
  std::optional<session_detail::http::response<session_detail::http::string_body>> response_;
};

}  // namespace gapless::door
