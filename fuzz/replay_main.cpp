// Replays fuzz inputs through a target's LLVMFuzzerTestOneInput without libFuzzer, so the
// normal (gcc, ASan, TSan) builds run every committed seed and every fixed crasher as a ctest:
//   <target>_replay DIR_OR_FILE...
// Directories are read non-recursively, files in name order; a directory that does not exist
// counts as empty (a target may have no regressions yet). A crash or failed invariant aborts.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

namespace fs = std::filesystem;

bool replay(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", file.c_str());
    return false;
  }
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  std::fprintf(stderr, "replaying %s (%zu bytes)\n", file.c_str(), bytes.size());
  // A heap copy of exactly the input's size, as libFuzzer passes it (never null, even when
  // empty), so ASan sees reads past the end.
  const std::unique_ptr<std::uint8_t[]> input(new std::uint8_t[bytes.size()]);
  std::copy(bytes.begin(), bytes.end(), input.get());
  LLVMFuzzerTestOneInput(input.get(), bytes.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t count = 0;
  bool ok = true;
  for (int i = 1; i < argc; ++i) {
    const fs::path arg = argv[i];
    std::error_code ec;
    if (fs::is_directory(arg, ec)) {
      std::vector<fs::path> files;
      for (const fs::directory_entry& e : fs::directory_iterator(arg, ec)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
      std::sort(files.begin(), files.end());
      for (const fs::path& f : files) {
        ok = replay(f) && ok;
        ++count;
      }
    } else if (fs::exists(arg, ec)) {
      ok = replay(arg) && ok;
      ++count;
    }
  }
  std::fprintf(stderr, "%zu input(s) replayed\n", count);
  return ok ? 0 : 1;
}
