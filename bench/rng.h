// The bench's random numbers: xoshiro256** seeded through SplitMix64, with an unbiased bounded
// draw. Written out rather than taken from <random> so a seed gives the same arrival sequence
// with every standard library (std::uniform_int_distribution is implementation-defined).
// It is not Go's math/rand, so runs match the FGD simulator's statistically, not bit for bit.
#pragma once

#include <cstdint>

namespace gapless::bench {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) {
    for (std::uint64_t& word : s_) word = splitmix(seed);
  }

  std::uint64_t next() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, n). REQUIRES: n > 0.
  std::uint64_t below(std::uint64_t n) {
    const std::uint64_t limit = -n % n;  // 2^64 mod n: draws under it would bias the result
    std::uint64_t x = next();
    while (x < limit) x = next();
    return x % n;
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static std::uint64_t splitmix(std::uint64_t& state) {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  std::uint64_t s_[4];
};

}  // namespace gapless::bench
