// Private to the policy layer: the `quotas:` section of a policy file -> placement::Quota.
#pragma once

#include <vector>

#include "gapless/placement/quota.h"
#include "yaml_reader.h"

namespace gapless::policy::detail {

// Reads the list under `f` (the `quotas` key), appending to *out. Errors as YamlReader's.
bool read_quotas(YamlReader& r, const Field& f, std::vector<placement::Quota>* out);

}  // namespace gapless::policy::detail
