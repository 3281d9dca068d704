// filter.keepBest (Profile::keep_best) as a stage of the runner (placement/stage.h): when more
// nodes pass Filter than the profile keeps, only the keep_best best-scored of them stay (higher
// raw score, then the lower tie_break_rank, as normalize ranks them), in input order; the others
// move to the rejected list under one unresolvable reason, "narrowed". Their scores land in the
// verdict cache, so the prioritize that follows costs little.
//
// Thread-safety: stateless.
#pragma once

#include "gapless/placement/stage.h"

namespace gapless::placement {

class KeepBestStage final : public Stage {
 public:
  std::string_view name() const override { return "keep_best"; }
  bool narrows(const Profile& profile, std::size_t passed) const override;
  void narrow(const Profile& profile, FilterResult* r,
              std::vector<const model::Node*>* passed_nodes,
              const std::vector<double>& raw) const override;
};

}  // namespace gapless::placement
