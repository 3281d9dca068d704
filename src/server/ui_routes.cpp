#include "ui_routes.h"

#include <nlohmann/json.hpp>

#include "gapless/server/ui_assets.h"

namespace gapless::server {

namespace {

constexpr const char* kJson = "application/json";
constexpr std::string_view kUi = "/ui";
constexpr std::string_view kExplain = "/ui/explain/";

UiAnswer not_found(const std::string& path) {
  return {404, nlohmann::json{{"Error", "no route GET " + path}}.dump(), kJson, ""};
}

// A pod UID as Kubernetes writes them (RFC 4122 text); anything else is refused before lookup.
bool plausible_uid(std::string_view uid) {
  if (uid.empty() || uid.size() > 64) return false;
  for (char c : uid) {
    const bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

bool is_ui_path(const std::string& path) {
  return path == kUi || path.rfind("/ui/", 0) == 0;
}

UiAnswer ui_answer(const Extender& extender, const std::string& path) {
  if (path == kUi) return {301, "", "text/plain", "ui/"};
  if (path == "/ui/map.json") {
    // Polled: never cached by the browser, or the map would stop moving.
    return {200, extender.gpu_map(), kJson, ""};
  }
  if (path.rfind(kExplain, 0) == 0) {
    const std::string uid = path.substr(kExplain.size());
    if (!plausible_uid(uid)) return not_found(path);
    return {200, extender.explain_pending(uid), kJson, ""};
  }
  const std::string_view file =
      path == "/ui/" ? std::string_view("index.html") : std::string_view(path).substr(4);
  for (const UiAsset& a : ui_assets()) {
    if (a.name == file) return {200, std::string(a.body), std::string(a.content_type), ""};
  }
  return not_found(path);
}

}  // namespace gapless::server
