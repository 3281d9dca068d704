// List + watch, as client-go's reflector does it (docs/extender-protocol.md §4.4).
#include "gapless/k8s/informer.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "gapless/k8s/json_fields.h"
#include "url.h"

namespace gapless::k8s {

using nlohmann::json;

namespace {

// A continue token can expire (410) while a large list is being paged; the list then starts
// over. After this many restarts in a row the 410 counts as a failure and backs off.
constexpr int kMaxListRestarts = 3;

// A watch that ends normally this fast without a single event is a server closing watches
// at once; re-watching immediately would spin, so it backs off like a failure.
constexpr std::chrono::seconds kShortWatch{1};

std::string metadata_string(const json& obj, std::string_view key) {
  const json* meta = field(obj, "metadata");
  return meta != nullptr ? string_field(*meta, key) : std::string();
}

// The message of a Status object, or the object as text.
std::string status_text(const json* status) {
  if (status == nullptr) return "no status object";
  std::string message = string_field(*status, "message");
  return message.empty() ? json_text(*status) : message;
}

}  // namespace

Informer::Informer(ApiTransport& api, InformerOptions options, InformerHandlers handlers)
    : api_(api), options_(std::move(options)), handlers_(std::move(handlers)) {}

std::string Informer::resource_version() const {
  std::lock_guard lock(mu_);
  return rv_;
}

void Informer::set_resource_version(std::string rv) {
  std::lock_guard lock(mu_);
  rv_ = std::move(rv);
}

void Informer::report(const std::string& message) const {
  if (handlers_.on_error) handlers_.on_error(message);
}

void Informer::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
}

void Informer::sleep_for(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, d, [this] { return stopping_.load(); });
}

Informer::Outcome Informer::list(std::string* error) {
  const std::string what = "list " + options_.path + ": ";
  std::string query;
  if (options_.page_size > 0) query += "&limit=" + std::to_string(options_.page_size);
  if (!options_.field_selector.empty()) {
    query += "&fieldSelector=" + url_encode(options_.field_selector);
  }
  for (int restarts = 0;; ++restarts) {
    std::vector<json> items;
    std::string rv;
    std::string cont;
    bool restart = false;
    do {
      std::string url = query;
      if (!cont.empty()) url += "&continue=" + url_encode(cont);
      if (!url.empty()) url[0] = '?';
      Result<ApiResponse> r = api_.call("GET", options_.path + url);
      if (stopping_) return Outcome::kFailed;
      if (!r.ok()) {
        *error = what + r.error();
        return Outcome::kFailed;
      }
      if (r->status == 410 && !cont.empty() && restarts < kMaxListRestarts) {
        restart = true;  // the continue token expired: list again from the start
        break;
      }
      if (!r->ok()) {
        *error = what + api_error(*r);
        return Outcome::kFailed;
      }
      json page = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
      if (!page.is_object()) {
        *error = what + "the response is not a JSON object";
        return Outcome::kFailed;
      }
      rv = metadata_string(page, "resourceVersion");
      cont = metadata_string(page, "continue");
      if (json* page_items = page.contains("items") ? &page["items"] : nullptr;
          page_items != nullptr && !page_items->is_null()) {
        if (!page_items->is_array()) {
          *error = what + "items: must be a list";
          return Outcome::kFailed;
        }
        for (json& item : *page_items) items.push_back(std::move(item));
      }
    } while (!cont.empty());
    if (restart) continue;
    if (rv.empty()) {
      *error = what + "the list has no metadata.resourceVersion";
      return Outcome::kFailed;
    }
    if (handlers_.on_list) handlers_.on_list(items);
    set_resource_version(std::move(rv));
    synced_ = true;
    return Outcome::kOk;
  }
}

Informer::Outcome Informer::watch(std::string* error, std::size_t* events) {
  const std::string what = "watch " + options_.path + ": ";
  std::string url =
      options_.path + "?watch=1&resourceVersion=" + url_encode(resource_version()) +
      "&allowWatchBookmarks=true&timeoutSeconds=" + std::to_string(options_.watch_timeout_seconds);
  if (!options_.field_selector.empty()) {
    url += "&fieldSelector=" + url_encode(options_.field_selector);
  }
  bool gone = false;
  std::string stream_error;
  Result<int> r = api_.watch(url, [&](const json& event) {
    if (stopping_) return false;
    ++*events;
    const std::string type = string_field(event, "type");
    const json* object = field(event, "object");
    if (type == "ADDED" || type == "MODIFIED" || type == "DELETED") {
      if (object == nullptr || !object->is_object()) {
        report(what + type + " event without an object; skipped");
        return true;
      }
      if (handlers_.on_event) handlers_.on_event(type, *object);
      if (std::string rv = metadata_string(*object, "resourceVersion"); !rv.empty()) {
        set_resource_version(std::move(rv));
      }
      return !stopping_;
    }
    if (type == "BOOKMARK") {
      if (object != nullptr) {
        if (std::string rv = metadata_string(*object, "resourceVersion"); !rv.empty()) {
          set_resource_version(std::move(rv));
        }
      }
      return !stopping_;
    }
    if (type == "ERROR") {
      const json* code = field(object, "code");
      if (code != nullptr && as_int64(*code) == 410) {
        gone = true;
      } else {
        stream_error = what + "ERROR event: " + status_text(object);
      }
      return false;
    }
    report(what + "unexpected event " + json_text(event) + "; skipped");
    return true;
  });
  if (!r.ok()) {
    *error = what + r.error();
    return Outcome::kFailed;
  }
  if (gone || *r == 410) return Outcome::kGone;
  if (!stream_error.empty()) {
    *error = stream_error;
    return Outcome::kFailed;
  }
  if (*r != 200) {
    *error = what + "HTTP " + std::to_string(*r);
    return Outcome::kFailed;
  }
  return Outcome::kOk;
}

void Informer::run() {
  std::chrono::milliseconds backoff = options_.backoff_initial;
  bool need_list = true;
  auto back_off = [&](const std::string& message) {
    if (!message.empty()) report(message);
    sleep_for(backoff);
    backoff = std::min(backoff * 2, options_.backoff_max);
  };
  while (!stopping_) {
    std::string error;
    try {
      if (need_list) {
        Outcome listed = list(&error);
        if (stopping_) break;
        if (listed != Outcome::kOk) {
          back_off(error);
          continue;
        }
        need_list = false;
        backoff = options_.backoff_initial;
      }
      std::size_t events = 0;
      const auto started = std::chrono::steady_clock::now();
      Outcome watched = watch(&error, &events);
      if (stopping_) break;
      if (events > 0) backoff = options_.backoff_initial;
      if (watched == Outcome::kGone) {
        need_list = true;  // history we need is gone: the relist replaces everything
      } else if (watched == Outcome::kFailed) {
        back_off(error);
      } else if (events == 0 && std::chrono::steady_clock::now() - started < kShortWatch) {
        back_off("");
      }
      // A normal end with events: re-watch at once from the last resourceVersion seen.
    } catch (const std::exception& e) {
      // A handler threw, so an event may be lost: start over from a full list.
      need_list = true;
      back_off(options_.path + ": " + e.what());
    }
  }
}

}  // namespace gapless::k8s
