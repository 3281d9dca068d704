// The head of a small valid policy file, for tests that append a section to it (quotas, a
// profile's filter): `version`, `default`, one profile. Always six lines, so a section appended
// starts on line 7 and the file:line of error messages stays what the tests expect.
#pragma once

#include <string>

namespace gapless::test {

inline std::string policy_head(const std::string& profile = "a",
                               const std::string& strategy = "bundle") {
  return "version: 1\ndefault: " + profile + "\nprofiles:\n  - name: " + profile +
         "\n    node: {strategies: {" + strategy + ": 1}}\n    gpu: {strategies: {" + strategy +
         ": 1}}\n";
}

}  // namespace gapless::test
