// The extender the extender_* fuzz targets drive, and the invariants every verb must keep.
//
// The model is the demo cluster (examples/demo-cluster.yaml) plus the four nodes the extender
// fixtures name (tests/fixtures/extender: gpu-h100-01, gpu-h100-02, gpu-a100-02,
// gpu-a100-mig-03), under policies/default.yaml. Pods are already bound to it (whole GPUs,
// shares, static/reconfigurable/pooled MIG, gpushare), among them the victims named by
// preempt-args.json, and one pod is stranded: its node (dgx1-v100-02) was replaced by an
// inventory that no longer holds its GPUs, so that node is fenced, as the informer leaves it.
// Other pods were filtered but not bound, so bind inputs can name them (kPending* below).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "gapless/k8s/binder.h"
#include "gapless/server/extender.h"
#include "gapless/server/metrics.h"

namespace gapless::fuzz {

// UIDs of bound pods (preempt victims) and of pending pods (bind candidates), for seeds.
inline constexpr const char* kBoundUids[] = {
    "a3f1c2d4-0b5e-4f67-8a9b-1c2d3e4f5a6b",  // 4 whole GPUs on gpu-a100-02
    "c7d8e9f0-1a2b-4c3d-9e4f-5a6b7c8d9e0f",  // 4 whole GPUs on gpu-h100-02
    "d1e2f3a4-5b6c-4d7e-8f90-a1b2c3d4e5f6",  // a share on gpu-h100-02
    "uid-bound-whole",                       // 2 whole GPUs on h100-nvs-01
    "uid-bound-mig-static",                  // mig-1g.10gb on a100-mig-01
    "uid-bound-mig-reconf",                  // mig-3g.40gb on a100-mig-01
    "uid-bound-mig-pool",                    // mig-1g.5gb from gpu-a100-mig-03's pool
    "uid-bound-gpushare",                    // 5 units on gpushare-01
    "uid-bound-stranded",                    // 2 GPUs on dgx1-v100-02, stranded (node fenced)
};
inline constexpr const char* kPendingUids[] = {
    "5d0c6f5e-3b0e-4c61-9f7e-2a8f3c1b7d42",  // ml-team/llm-train-0, 2 GPUs (the fixture pod)
    "uid-pending-shared",                    // default/pending-shared
    "uid-pending-mig",                       // default/pending-mig
    "uid-pending-gpushare",                  // default/pending-gpushare
    "uid-pending-cpu",                       // default/pending-cpu, no GPU
};

class ExtenderFixture {
 public:
  // A fresh model in the state described above. Aborts if any step of the setup fails.
  ExtenderFixture();
  ExtenderFixture(const ExtenderFixture&) = delete;
  ExtenderFixture& operator=(const ExtenderFixture&) = delete;

  server::Extender& extender() { return *extender_; }

 private:
  server::InMemoryBinder binder_;
  std::unique_ptr<server::Extender> extender_;
};

enum class Verb { kFilter, kPrioritize, kBind, kPreempt };

// Calls `verb` with `body` and checks what every verb promises (extender.h): it does not throw,
// it answers with JSON, and filter, prioritize and preempt leave the model as it was. Bind may
// change the model, but only when it succeeds: an answer with an Error leaves it unchanged.
// "Unchanged" means equal to the fixture's initial model, so a fixture on which a bind has
// succeeded must not be used again. A broken promise aborts with the answer.
void run_verb(ExtenderFixture& fixture, Verb verb, std::string_view body);

}  // namespace gapless::fuzz
