#include "test_paths.h"

namespace gapless::test {

const std::string& source_dir() {
  static const std::string dir = GAPLESS_SOURCE_DIR;
  return dir;
}

const std::string& binary_dir() {
  static const std::string dir = GAPLESS_BINARY_DIR;
  return dir;
}

}  // namespace gapless::test
