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

// Policy files are a few KB; a larger file is refused rather than read into memory.
inline constexpr long kMaxPolicyBytes = 4 * 1024 * 1024;

// The text of a policy file. Never blocks: anything but a regular file (a FIFO, a device, a
// socket, a directory), a missing or unreadable file, or one over kMaxPolicyBytes is an error
// naming the path and why.
Result<std::string> read_policy_text(const std::string& path);

// Reads (read_policy_text) and parses a file.
Result<placement::Policy> load_policy_file(const std::string& path);

}  // namespace gapless::policy
