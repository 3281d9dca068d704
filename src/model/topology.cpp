#include "gapless/model/topology.h"

#include <algorithm>
#include <array>
#include <bit>

namespace gapless::model {
namespace {
constexpr std::array<std::string_view, 5> kPathWords = {"PIX", "PXB", "PHB", "NODE", "SYS"};
}

bool parse_pcie_path(std::string_view word, PciePath* out) {
  for (std::size_t i = 0; i < kPathWords.size(); ++i) {
    if (kPathWords[i] == word) {
      *out = static_cast<PciePath>(i);
      return true;
    }
  }
  return false;
}

std::string_view to_string(PciePath path) {
  return kPathWords[static_cast<std::size_t>(path)];
}

int Link::weight() const {
  if (is_nvlink()) return 100 * std::min(nvlink_count, kMaxWeight / 100);
  if (kind == Kind::kNVLink) return 10;  // degraded or empty NVLink: the slowest PCIe path
  return 10 * (5 - static_cast<int>(path));
}

LinkGraph::LinkGraph(int gpu_count)
    : g_(gpu_count),
      nvlink_masks_(gpu_count, 0),
      weights_(static_cast<std::size_t>(gpu_count) * gpu_count, 0) {
  // Pairs never set are PCIe SYS.
  for (int a = 0; a < gpu_count; ++a) {
    for (int b = 0; b < gpu_count; ++b) {
      if (a != b) weights_[a * gpu_count + b] = static_cast<std::uint16_t>(Link{}.weight());
    }
  }
}

void LinkGraph::set(int a, int b, const Link& link) {
  auto [e, exists] = boost::edge(a, b, g_);
  if (exists) {
    g_[e] = link;
  } else {
    boost::add_edge(a, b, link, g_);
  }
  const std::uint64_t bit_a = std::uint64_t{1} << a, bit_b = std::uint64_t{1} << b;
  nvlink_masks_[a] = link.is_nvlink() ? (nvlink_masks_[a] | bit_b) : (nvlink_masks_[a] & ~bit_b);
  nvlink_masks_[b] = link.is_nvlink() ? (nvlink_masks_[b] | bit_a) : (nvlink_masks_[b] & ~bit_a);
  weights_[a * size() + b] = weights_[b * size() + a] = static_cast<std::uint16_t>(link.weight());
}

Link LinkGraph::get(int a, int b) const {
  auto [e, exists] = boost::edge(a, b, g_);
  return exists ? g_[e] : Link{};
}

int LinkGraph::nvlink_degree(int a) const {
  return std::popcount(nvlink_masks_[a]);
}

}  // namespace gapless::model
