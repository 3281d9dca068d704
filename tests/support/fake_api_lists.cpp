// The fake API server's lists (chunked, from snapshots) and watches (chunked streams fed from the
// event history), with field selectors.
#include <httplib.h>

#include <algorithm>
#include <charconv>

#include "fake_api_internal.h"
#include "fake_api_server.h"

namespace gapless::test {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::size_t kMaxSnapshots = 64;

// The field as a selector compares it: a string as is, a bool as "true"/"false", missing as "".
std::string field_value(const json& obj, const std::string& field) {
  const json* at = &obj;
  std::size_t start = 0;
  while (start <= field.size()) {
    const std::size_t dot = std::min(field.find('.', start), field.size());
    if (!at->is_object()) return "";
    auto it = at->find(field.substr(start, dot - start));
    if (it == at->end()) return "";
    at = &*it;
    start = dot + 1;
  }
  if (at->is_string()) return at->get<std::string>();
  if (at->is_boolean()) return at->get<bool>() ? "true" : "false";
  if (at->is_null()) return "";
  return at->dump();
}

std::optional<std::uint64_t> parse_rv(const std::string& text) {
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

void send_status(httplib::Response& res, int code, const std::string& message) {
  res.status = code;
  res.set_content(failure_status(code, message).dump(), "application/json");
}

std::string expired_message(std::uint64_t asked, std::uint64_t oldest) {
  return "too old resource version: " + std::to_string(asked) + " (" + std::to_string(oldest) + ")";
}

std::string error_event(const std::string& message) {
  return json{{"type", "ERROR"}, {"object", failure_status(410, message)}}.dump() + "\n";
}

}  // namespace

Result<FieldSelector> parse_field_selector(const std::vector<std::string>& allowed,
                                           const std::string& text) {
  FieldSelector out;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string term = text.substr(start, comma - start);
    start = comma + 1;
    if (term.empty()) continue;
    FieldRequirement r;
    std::size_t op = term.find("!=");
    std::size_t value_at = op + 2;
    r.equal = op == std::string::npos;
    if (r.equal) {
      op = term.find("==");
      value_at = op + 2;
      if (op == std::string::npos) {
        op = term.find('=');
        value_at = op + 1;
      }
    }
    if (op == std::string::npos) return Error{"invalid selector: '" + term + "'"};
    r.field = term.substr(0, op);
    r.value = term.substr(value_at);
    if (std::find(allowed.begin(), allowed.end(), r.field) == allowed.end()) {
      return Error{"field label not supported: " + r.field};
    }
    out.push_back(std::move(r));
  }
  return out;
}

bool selector_matches(const FieldSelector& selector, const json& obj) {
  return std::all_of(selector.begin(), selector.end(), [&](const FieldRequirement& r) {
    return (field_value(obj, r.field) == r.value) == r.equal;
  });
}

bool FakeApiServer::Watch::wants(const Entry& e) const {
  if (e.kind != kind) return false;
  if (!ns.empty() && field_value(e.obj, "metadata.namespace") != ns) return false;
  return selector_matches(selector, e.obj);
}

// ---- Routes ------------------------------------------------------------------------------

void FakeApiServer::handle_list_or_watch(Kind kind, const std::string& ns,
                                         const httplib::Request& req, httplib::Response& res) {
  const std::string watch = req.get_param_value("watch");
  if (watch == "1" || watch == "true") return handle_watch(kind, ns, req, res);
  handle_list(kind, ns, req, res);
}

void FakeApiServer::handle_list(Kind kind, const std::string& ns, const httplib::Request& req,
                                httplib::Response& res) {
  std::size_t limit = 0;
  if (req.has_param("limit")) {
    auto v = parse_rv(req.get_param_value("limit"));
    if (!v) return send_status(res, 400, "invalid limit");
    limit = *v;
  }
  auto selector = parse_field_selector(info(kind).fields, req.get_param_value("fieldSelector"));
  if (!selector.ok()) return send_status(res, 400, selector.error());

  std::shared_ptr<const Snapshot> snap;
  std::size_t offset = 0;
  std::uint64_t snap_id = 0;
  const std::string token = req.get_param_value("continue");  // "c<snapshot>.<offset>"
  {
    std::lock_guard lock(mu_);
    if (!token.empty()) {
      const std::size_t dot = token.find('.');
      std::optional<std::uint64_t> id, off;
      if (token.starts_with('c') && dot != std::string::npos) {
        id = parse_rv(token.substr(1, dot - 1));
        off = parse_rv(token.substr(dot + 1));
      }
      auto it = id ? snapshots_.find(*id) : snapshots_.end();
      if (it == snapshots_.end() || !off) {
        return send_status(res, 410,
                           "The provided continue parameter is too old to display a consistent "
                           "list result. You can start a new list without the continue "
                           "parameter.");
      }
      snap = it->second;
      snap_id = it->first;
      offset = std::min<std::size_t>(*off, snap->items.size());
    } else {
      auto s = std::make_shared<Snapshot>();
      s->rv = rv_;
      s->selected = !selector->empty();
      Watch filter{};
      filter.kind = kind;
      filter.ns = ns;
      filter.selector = *selector;
      s->items.reserve(store(kind).size());
      for (const auto& [key, entry] : store(kind)) {
        if (filter.wants(*entry)) s->items.push_back(entry);
      }
      snap = s;
      if (limit > 0 && s->items.size() > limit) {  // more chunks will follow
        snap_id = ++snapshot_counter_;
        snapshots_[snap_id] = snap;
        if (snapshots_.size() > kMaxSnapshots) snapshots_.erase(snapshots_.begin());
      }
    }
  }
  const std::size_t end =
      limit == 0 ? snap->items.size() : std::min(snap->items.size(), offset + limit);
  json meta = {{"resourceVersion", std::to_string(snap->rv)}};
  if (end < snap->items.size()) {
    meta["continue"] = "c" + std::to_string(snap_id) + "." + std::to_string(end);
    if (!snap->selected) meta["remainingItemCount"] = snap->items.size() - end;
  }
  std::string body = R"({"kind":")";
  body += info(kind).list_kind;
  body += R"(","apiVersion":")";
  body += info(kind).api_version;
  body += R"(","metadata":)" + meta.dump() + R"(,"items":[)";
  for (std::size_t i = offset; i < end; ++i) {
    if (i > offset) body += ',';
    body += snap->items[i]->item_text;
  }
  body += "]}";
  res.status = 200;
  res.set_content(std::move(body), "application/json");
}

void FakeApiServer::handle_watch(Kind kind, const std::string& ns, const httplib::Request& req,
                                 httplib::Response& res) {
  auto selector = parse_field_selector(info(kind).fields, req.get_param_value("fieldSelector"));
  if (!selector.ok()) return send_status(res, 400, selector.error());
  auto w = std::make_shared<Watch>();
  w->kind = kind;
  w->ns = ns;
  w->selector = std::move(selector.value());
  const std::string bookmarks = req.get_param_value("allowWatchBookmarks");
  w->bookmarks = bookmarks == "true" || bookmarks == "1";
  auto timeout = parse_rv(req.get_param_value("timeoutSeconds"));
  w->deadline = Clock::now() + (timeout && *timeout > 0 ? std::chrono::seconds(*timeout)
                                                        : std::chrono::seconds(1800));
  const std::string rv_text = req.get_param_value("resourceVersion");
  {
    std::lock_guard lock(mu_);
    if (rv_text.empty() || rv_text == "0") {  // start with the current state
      for (const auto& [key, entry] : store(kind)) {
        if (!w->wants(*entry)) continue;
        w->initial += R"({"type":"ADDED","object":)" + entry->full_text() + "}\n";
      }
      w->cursor = rv_;
    } else {
      auto rv = parse_rv(rv_text);
      if (!rv) return send_status(res, 400, "invalid resource version \"" + rv_text + "\"");
      if (*rv < oldest_rv_) {
        const std::string message = expired_message(*rv, oldest_rv_);
        if (expiry_form_ == ExpiryForm::kHttpStatus) return send_status(res, 410, message);
        res.status = 200;
        res.set_content(error_event(message), "application/json");
        return;
      }
      w->cursor = *rv;
    }
    w->bookmark_generation = bookmark_generation_;
    watches_.push_back(w);
  }
  changed_.notify_all();
  res.status = 200;
  res.set_chunked_content_provider(
      "application/json",
      [this, w](std::size_t, httplib::DataSink& sink) {
        std::string out;
        bool end = false;
        {
          std::unique_lock lock(mu_);
          while (!(end = next_chunk_locked(*w, out)) && out.empty()) {
            if (changed_.wait_until(lock, w->deadline) == std::cv_status::timeout &&
                Clock::now() >= w->deadline) {
              next_chunk_locked(*w, out);  // timeoutSeconds: a normal end
              end = true;
              break;
            }
          }
        }
        if (!out.empty() && !sink.write(out.data(), out.size())) return false;
        if (end && w->abrupt) return false;  // drop the connection mid-stream
        if (end) sink.done();
        return true;
      },
      [this, w](bool) {
        {
          std::lock_guard lock(mu_);
          std::erase(watches_, w);
        }
        changed_.notify_all();
      });
}

// Appends what the watch has not seen yet: synthetic ADDED events, history events it wants
// (relabelled when the object starts or stops matching its selector), a bookmark. Returns true
// when the stream must end after `out`. A cleanly closed watch still delivers the changes made
// before close_watches(), none after.
bool FakeApiServer::next_chunk_locked(Watch& w, std::string& out) {
  if (stopping_ || (w.closed && w.abrupt)) return true;
  if (!w.initial.empty()) {
    out += w.initial;
    w.initial.clear();
  }
  const std::uint64_t until = w.closed ? w.close_rv : rv_;
  if (w.expire || (w.cursor < oldest_rv_ && w.cursor < until)) {
    out += error_event(expired_message(w.cursor, oldest_rv_));
    return true;
  }
  auto it = std::upper_bound(history_.begin(), history_.end(), w.cursor,
                             [](std::uint64_t rv, const HistoryEvent& e) { return rv < e.rv; });
  for (; it != history_.end() && it->rv <= until; ++it) {
    const bool now = w.wants(*it->object);
    const bool before = it->type == "MODIFIED" && it->old != nullptr && w.wants(*it->old);
    std::string type = it->type;
    if (it->type == "MODIFIED" && now != before) type = now ? "ADDED" : "DELETED";
    if (now || before) {
      out += R"({"type":")" + type + R"(","object":)" + it->object->full_text() + "}\n";
    }
  }
  w.cursor = std::max(w.cursor, until);
  if (w.bookmarks && w.bookmark_generation < bookmark_generation_) {
    w.bookmark_generation = bookmark_generation_;
    out += R"({"type":"BOOKMARK","object":{"kind":")";
    out += info(w.kind).kind;
    out += R"(","apiVersion":")";
    out += info(w.kind).api_version;
    out += R"(","metadata":{"resourceVersion":")" + std::to_string(w.cursor) + "\"}}}\n";
  }
  return w.closed;
}

// ---- Watch control -----------------------------------------------------------------------

void FakeApiServer::send_bookmark() {
  {
    std::lock_guard lock(mu_);
    ++bookmark_generation_;
  }
  changed_.notify_all();
}

void FakeApiServer::close_watches(bool abrupt) {
  {
    std::lock_guard lock(mu_);
    for (auto& w : watches_) {
      if (w->closed) continue;
      w->closed = true;
      w->close_rv = rv_;
      w->abrupt = abrupt;
    }
  }
  changed_.notify_all();
}

void FakeApiServer::expire_open_watches() {
  {
    std::lock_guard lock(mu_);
    for (auto& w : watches_) w->expire = true;
  }
  changed_.notify_all();
}

void FakeApiServer::expire_history_before(const std::string& rv) {
  auto v = parse_rv(rv);
  if (!v) throw std::logic_error("expire_history_before: not a resourceVersion: " + rv);
  {
    std::lock_guard lock(mu_);
    oldest_rv_ = std::max(oldest_rv_, *v);
    while (!history_.empty() && history_.front().rv <= oldest_rv_) history_.pop_front();
    snapshots_.clear();
  }
  changed_.notify_all();
}

void FakeApiServer::compact() {
  expire_history_before(resource_version());
}

void FakeApiServer::set_expiry_form(ExpiryForm form) {
  std::lock_guard lock(mu_);
  expiry_form_ = form;
}

void FakeApiServer::expire_continue_tokens() {
  std::lock_guard lock(mu_);
  snapshots_.clear();
}

std::size_t FakeApiServer::open_watches_locked() const {
  return std::count_if(watches_.begin(), watches_.end(),
                       [](const auto& w) { return !w->closed && !w->expire; });
}

std::size_t FakeApiServer::open_watches() const {
  std::lock_guard lock(mu_);
  return open_watches_locked();
}

bool FakeApiServer::wait_for_watches(std::size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return changed_.wait_for(lock, timeout, [&] { return open_watches_locked() >= n; });
}

}  // namespace gapless::test
