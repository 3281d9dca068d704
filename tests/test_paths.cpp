#include "test_paths.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace gapless::test {

const std::string& source_dir() {
  static const std::string dir = GAPLESS_SOURCE_DIR;
  return dir;
}

const std::string& binary_dir() {
  static const std::string dir = GAPLESS_BINARY_DIR;
  return dir;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string fixture_text(const std::string& relative) {
  return read_text(source_dir() + "/tests/fixtures/" + relative);
}

std::string topology_fixture_text(const std::string& name) {
  return fixture_text("topologies/" + name + ".json");
}

}  // namespace gapless::test
