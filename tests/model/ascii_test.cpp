// ASCII case folding: A-Z only, so the characters either side of the range and non-ASCII bytes
// (UTF-8 model names, JSON keys) come through as they are.
#include <catch2/catch.hpp>

#include "gapless/model/ascii.h"
#include "gapless/model/gpu.h"

using gapless::model::ascii_iequals;
using gapless::model::ascii_lower;
using gapless::model::model_key;

TEST_CASE("ascii_lower folds A-Z and nothing else", "[model][ascii]") {
  CHECK(ascii_lower(std::string_view("NVIDIA-H100-80GB-HBM3")) == "nvidia-h100-80gb-hbm3");
  CHECK(ascii_lower(std::string_view("@AZ[`az{")) == "@az[`az{");  // neighbours of the ranges
  CHECK(ascii_lower(std::string_view("\xC3\x89t\xC3\xA9-GPU")) == "\xC3\x89t\xC3\xA9-gpu");
  CHECK(ascii_lower(std::string_view("")).empty());
  std::string_view with_nul("A\0B", 3);
  CHECK(ascii_lower(with_nul) == std::string("a\0b", 3));
  static_assert(ascii_lower('Q') == 'q' && ascii_lower('q') == 'q' && ascii_lower('0') == '0');
}

TEST_CASE("ascii_iequals ignores the case of ASCII letters only", "[model][ascii]") {
  CHECK(ascii_iequals("NodeNames", "nodenames"));
  CHECK(ascii_iequals("Transfer-Encoding", "TRANSFER-ENCODING"));
  CHECK(ascii_iequals("", ""));
  CHECK_FALSE(ascii_iequals("nodenames", "nodename"));   // lengths differ
  CHECK_FALSE(ascii_iequals("A100-40GB", "A100-80GB"));  // one byte differs
  CHECK_FALSE(ascii_iequals("@", "`"));                  // 0x40 vs 0x60: not letters
  CHECK_FALSE(ascii_iequals("\xC3\x89", "\xC3\xA9"));    // É vs é: not ASCII, not folded
  static_assert(ascii_iequals("Pod", "pOD"));
}

TEST_CASE("model_key: one key for every spelling of a GPU model", "[model][ascii]") {
  // The node's product label, a pod's gapless.io/gpu-model and a quota's models key may differ
  // in case; quota usage, the mix's model demand and the fragment reserves all key on this.
  CHECK(model_key("NVIDIA-A100-SXM4-80GB") == model_key("nvidia-a100-sxm4-80gb"));
  CHECK(model_key("NVIDIA-A100-SXM4-80GB") == "nvidia-a100-sxm4-80gb");
  CHECK(model_key("A100-SXM4-40GB") != model_key("A100-SXM4-80GB"));
  CHECK(model_key("").empty());
}
