// Loading policy files (policies/*.yaml) into placement::Policy, with validation messages that
// name the file, line and key, e.g. "policies/x.yaml:12: profiles[1].node.strategies: unknown
// strategy \"bundel\" (known: bundle, spread)".
#pragma once

#include <string>

#include "gapless/model/result.h"
#include "gapless/placement/profile.h"

namespace gapless::policy {

// Parses and validates YAML text. `source_name` is used in messages (a path, or "<inline>").
Result<placement::Policy> parse_policy(const std::string& yaml_text, const std::string& source_name);

// Reads and parses a file. A missing or unreadable file is an error naming the path.
Result<placement::Policy> load_policy_file(const std::string& path);

}  // namespace gapless::policy
