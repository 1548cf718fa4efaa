// The random numbers of the synthetic data: SplitMix64 and our own distributions, because the
// standard library's distributions differ between implementations and the data must be the same
// everywhere.
#ifndef VIDCLF_TRAIN_SYNTHETIC_RANDOM_H_
#define VIDCLF_TRAIN_SYNTHETIC_RANDOM_H_

#include <cstdint>

namespace vidclf::train {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  double Uniform(double low, double high) {
    return low + (high - low) * static_cast<double>(Next() >> 11) * 0x1.0p-53;
  }
  int Below(int n) { return static_cast<int>(Next() % static_cast<uint64_t>(n)); }

 private:
  uint64_t state_;
};

// A seed made of two.
inline uint64_t Mix(uint64_t a, uint64_t b) { return Rng(a ^ Rng(b).Next()).Next(); }

}  // namespace vidclf::train

#endif  // VIDCLF_TRAIN_SYNTHETIC_RANDOM_H_
