// Pod objects (k8s::parse_pod) from JSON bytes. On success the request must be one consistent
// kind (pod_request.h); on failure there must be a message.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "gapless/k8s/pod_request.h"

namespace {

using gapless::fuzz::check;
using gapless::model::GpuRequest;
using gapless::model::RequestKind;

void check_request(const GpuRequest& r) {
  const bool none = r.kind == RequestKind::kNone, whole = r.kind == RequestKind::kWhole,
             shared = r.kind == RequestKind::kShared, mig = r.kind == RequestKind::kMig,
             gpushare = r.kind == RequestKind::kGpushare;
  check(whole ? r.whole >= 1 : r.whole == 0, "whole GPU count does not match the kind");
  check(mig ? !r.mig_profile.empty() && r.mig_count >= 1 : r.mig_profile.empty(),
        "MIG fields do not match the kind");
  check(gpushare ? r.gpushare_units >= 1 : r.gpushare_units == 0,
        "gpushare units do not match the kind");
  if (shared) {
    check(r.shared.count >= 1 && r.shared.memory_mib >= 0 && r.shared.compute_milli >= 0 &&
              r.shared.compute_milli <= 1000 &&
              (r.shared.memory_mib > 0 || r.shared.compute_milli > 0),
          "bad shared-GPU request");
  } else {
    check(r.shared == gapless::model::SharedAsk{}, "shared fields set on another kind");
  }
  check(!none || r.units() == 0, "a request without GPUs has units");
  check(r.units() >= 0, "negative units");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const nlohmann::json pod = nlohmann::json::parse(gapless::fuzz::as_text(data, size), nullptr,
                                                   /*allow_exceptions=*/false);
  if (pod.is_discarded()) return 0;
  auto parsed = gapless::k8s::parse_pod(pod);
  if (!parsed) {
    check(!parsed.error().empty(), "parse_pod failed without a message");
    return 0;
  }
  check(!parsed->info.ns.empty(), "a parsed pod without a namespace");
  check_request(parsed->request);
  return 0;
}
