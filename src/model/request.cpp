#include "gapless/model/request.h"

namespace gapless::model {

int GpuRequest::units() const {
  switch (kind) {
    case RequestKind::kWhole: return whole;
    case RequestKind::kShared: return shared.count;
    case RequestKind::kMig: return mig_count;
    case RequestKind::kGpushare: return 1;
    case RequestKind::kNone: break;
  }
  return 0;
}

}  // namespace gapless::model
