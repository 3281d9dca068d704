// The GPU map page's static files (ui/), compiled into the binary by cmake/embed_ui.cmake.
#pragma once

#include <span>
#include <string_view>

namespace gapless::server {

struct UiAsset {
  std::string_view name;          // file name under ui/, e.g. "map.js"
  std::string_view content_type;  // e.g. "text/javascript; charset=utf-8"
  std::string_view body;
};

// Every file, sorted by name.
std::span<const UiAsset> ui_assets();

}  // namespace gapless::server
