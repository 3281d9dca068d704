#include "gapless/model/request.h"

#include <functional>
#include <string_view>

namespace gapless::model {

int GpuRequest::units() const {
  switch (kind) {
    case RequestKind::kWhole:
      return whole;
    case RequestKind::kShared:
      return shared.count;
    case RequestKind::kMig:
      return mig_count;
    case RequestKind::kGpushare:
      return 1;
    case RequestKind::kNone:
      break;
  }
  return 0;
}

namespace {

std::size_t combine(std::size_t h, std::size_t v) {
  return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
}

}  // namespace

std::size_t GpuRequestHash::operator()(const GpuRequest& r) const {
  std::size_t h = static_cast<std::size_t>(r.kind);
  h = combine(h, static_cast<std::size_t>(r.whole));
  h = combine(h, static_cast<std::size_t>(r.shared.memory_mib));
  h = combine(h, static_cast<std::size_t>(r.shared.compute_milli));
  h = combine(h, static_cast<std::size_t>(r.shared.count));
  h = combine(h, std::hash<std::string_view>{}(r.mig_profile));
  h = combine(h, static_cast<std::size_t>(r.mig_count));
  h = combine(h, static_cast<std::size_t>(r.gpushare_units));
  for (const std::string& m : r.models) h = combine(h, std::hash<std::string_view>{}(m));
  h = combine(h, static_cast<std::size_t>(r.topology));
  h = combine(h, static_cast<std::size_t>(r.host.cpu_milli));
  return combine(h, static_cast<std::size_t>(r.host.memory_mib));
}

}  // namespace gapless::model
