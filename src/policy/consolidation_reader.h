// Private to the policy layer: the `consolidation:` section of a policy file ->
// placement::ConsolidationRules (documented in policies/default.yaml).
#pragma once

#include "gapless/placement/consolidation_rules.h"
#include "yaml_reader.h"

namespace gapless::policy::detail {

// Reads the map under `f` (the `consolidation` key) into *out. Errors as YamlReader's.
bool read_consolidation(YamlReader& r, const Field& f, placement::ConsolidationRules* out);

}  // namespace gapless::policy::detail
