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

std::string fixture_text(const std::string& relative) {
  const std::string path = source_dir() + "/tests/fixtures/" + relative;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read the fixture " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace gapless::test
