#include "media/decode_split.h"

#include <algorithm>
#include <iterator>

namespace vidclf::media {
namespace {

// The keyframe at or before `frame`; 0 when none is listed (decoding starts at the start).
int64_t KeyframeAtOrBefore(const std::vector<int64_t>& keyframes, int64_t frame) {
  const auto after = std::upper_bound(keyframes.begin(), keyframes.end(), frame);
  return after == keyframes.begin() ? 0 : *std::prev(after);
}

// Where the decoder starts on wanted[i]: at the keyframe before it when that lies past
// wanted[i - 1], else right after wanted[i - 1].
int64_t StartOf(const std::vector<int64_t>& keyframes, const std::vector<int64_t>& wanted,
                size_t i) {
  const int64_t after_previous = i == 0 ? 0 : wanted[i - 1] + 1;
  return std::max(after_previous, KeyframeAtOrBefore(keyframes, wanted[i]));
}

}  // namespace

int64_t FramesToDecode(const std::vector<int64_t>& keyframes, const std::vector<int64_t>& wanted) {
  int64_t frames = 0;
  for (size_t i = 0; i < wanted.size(); ++i) {
    frames += wanted[i] - StartOf(keyframes, wanted, i) + 1;
  }
  return frames;
}

size_t SplitAtKeyframe(const std::vector<int64_t>& keyframes, const std::vector<int64_t>& wanted,
                       double max_share) {
  const int64_t total = FramesToDecode(keyframes, wanted);
  size_t best = 0;
  int64_t best_larger = total;
  int64_t before = 0;  // frames to decode for wanted[0, i)
  for (size_t i = 0; i < wanted.size(); ++i) {
    const int64_t start = StartOf(keyframes, wanted, i);
    const bool independent = i > 0 && KeyframeAtOrBefore(keyframes, wanted[i]) > wanted[i - 1];
    if (independent) {
      const int64_t larger = std::max(before, total - before);
      if (larger < best_larger) {
        best = i;
        best_larger = larger;
      }
    }
    before += wanted[i] - start + 1;
  }
  if (best == 0 || static_cast<double>(best_larger) > max_share * static_cast<double>(total)) {
    return 0;
  }
  return best;
}

}  // namespace vidclf::media
