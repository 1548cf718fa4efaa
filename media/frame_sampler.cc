#include "media/frame_sampler.h"

namespace vidclf::media {

std::vector<int64_t> UniformSampleIndices(int64_t total_frames, int64_t num_samples) {
  std::vector<int64_t> indices;
  if (total_frames <= 0) return indices;
  if (num_samples <= 0 || num_samples >= total_frames) {
    indices.reserve(total_frames);
    for (int64_t i = 0; i < total_frames; ++i) indices.push_back(i);
    return indices;
  }
  indices.reserve(num_samples);
  for (int64_t i = 0; i < num_samples; ++i) {
    // Integer form of floor((i + 0.5) * total / n), exact for any video length.
    indices.push_back(((2 * i + 1) * total_frames) / (2 * num_samples));
  }
  return indices;
}

}  // namespace vidclf::media
