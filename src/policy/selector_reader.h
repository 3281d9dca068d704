// Private to the policy layer: a Kubernetes label selector (`matchLabels`, `matchExpressions`)
// in a policy file -> model::LabelSelector, with the API server's validation.
#pragma once

#include "gapless/model/labels.h"
#include "yaml_reader.h"

namespace gapless::policy::detail {

// Reads the selector under `f`. An empty map (or no value) is the selector matching everything.
bool read_label_selector(YamlReader& r, const Field& f, model::LabelSelector* out);

}  // namespace gapless::policy::detail
