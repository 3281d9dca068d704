// Where the tests find the source tree (fixtures, policies, examples) and the build tree (the
// binaries some tests run). The absolute paths are compiled into one object,
// tests/test_paths.cpp, and not into every test object: a test object then holds no path of
// the clone it was built in, so ccache reuses it in the next clone (CI builds a fresh one).
#pragma once

#include <string>

namespace gapless::test {

// The repository's root, without a trailing slash.
const std::string& source_dir();

// The directory holding gapless-extender, kubectl-gapless and the other binaries.
const std::string& binary_dir();

// The whole file, read as bytes; throws (failing the test) naming the path if it cannot be read.
std::string read_text(const std::string& path);

// read_text of tests/fixtures/<relative>.
std::string fixture_text(const std::string& relative);

// A node's topology annotation as the agent writes it, tests/fixtures/topologies/<name>.json.
std::string topology_fixture_text(const std::string& name);

}  // namespace gapless::test
