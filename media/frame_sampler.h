// Chooses which frames of a video to keep.
#ifndef VIDCLF_MEDIA_FRAME_SAMPLER_H_
#define VIDCLF_MEDIA_FRAME_SAMPLER_H_

#include <cstdint>
#include <vector>

namespace vidclf::media {

// Indices of `num_samples` frames spread uniformly over `total_frames`: the centre of each of
// `num_samples` equal segments, floor((i + 0.5) * total / num_samples). Strictly increasing, so no
// frame is used twice; when the video has fewer frames than asked for, every frame is returned.
// `num_samples` <= 0 also returns every frame.
std::vector<int64_t> UniformSampleIndices(int64_t total_frames, int64_t num_samples);

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_FRAME_SAMPLER_H_
