// Chooses which frames of a video to keep.
#ifndef VIDCLF_MEDIA_FRAME_SAMPLER_H_
#define VIDCLF_MEDIA_FRAME_SAMPLER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace vidclf::media {

enum class SamplingStrategy {
  // `num_frames` frames spread over the whole video (the seeds' clip sampling).
  kUniform,
  // `frames_per_second` frames per second of presentation time, at most `num_frames` (0: no cap).
  kFps,
  // `num_frames` frames, every `stride_frames`-th, from the first frame at or after
  // `start_seconds` (a segment of a longer video or stream).
  kWindow,
  // Every frame, at most `num_frames` (0: no cap): the first ones.
  kAll,
};

struct SamplingOptions {
  SamplingStrategy strategy = SamplingStrategy::kUniform;
  // See SamplingStrategy. Must be >= 0; 0 with kUniform or kWindow means every frame.
  int num_frames = 16;
  // kFps: frames kept per second; must be > 0.
  double frames_per_second = 1.0;
  // kWindow: distance between kept frames (1: consecutive frames); must be >= 1.
  int stride_frames = 1;
  // kWindow: presentation time of the window's first frame; must be >= 0.
  double start_seconds = 0.0;

  // Fast decoding, opt-in: the defaults decode exactly the frames asked for, as in training.
  // kUniform only: in each of the num_frames equal segments, take the keyframe nearest the
  // segment's centre when the segment holds one, instead of the centre frame. A keyframe needs no
  // other frame decoded, so when keyframes come at least once a segment only keyframes are
  // decoded; segments without one keep their centre frame.
  bool snap_to_keyframes = false;
  // Skip the decoder's in-loop deblocking filter (H.264, HEVC, VP9...): less work per frame,
  // slightly blockier pixels, and drift until the next keyframe.
  bool skip_loop_filter = false;
};

// "uniform", "fps", "window" or "all"; INVALID_ARGUMENT otherwise, listing the names.
absl::StatusOr<SamplingStrategy> ParseSamplingStrategy(const std::string& name);

// INVALID_ARGUMENT naming the field when `options` cannot be used.
absl::Status ValidateSamplingOptions(const SamplingOptions& options);

// Indices of `num_samples` frames spread uniformly over `total_frames`: the centre of each of
// `num_samples` equal segments, floor((i + 0.5) * total / num_samples). Strictly increasing, so no
// frame is used twice; when the video has fewer frames than asked for, every frame is returned.
// `num_samples` <= 0 also returns every frame.
std::vector<int64_t> UniformSampleIndices(int64_t total_frames, int64_t num_samples);

// `uniform` (UniformSampleIndices(total_frames, its size)) with each index moved to the keyframe
// nearest to it within its own segment [floor(i * total / n), floor((i + 1) * total / n)), when
// that segment holds one. `keyframes`: presentation indices, increasing. Still strictly
// increasing, since segments do not overlap.
std::vector<int64_t> SnapToKeyframes(std::vector<int64_t> uniform, int64_t total_frames,
                                     const std::vector<int64_t>& keyframes);

// The frames `options` keeps, as strictly increasing indices into `timestamps_seconds` (the
// presentation time of every frame of the video, in presentation order, non-decreasing).
// kFps keeps the first frame in each 1/frames_per_second interval of presentation time.
// `options` must pass ValidateSamplingOptions.
std::vector<int64_t> SampleFrameIndices(const std::vector<double>& timestamps_seconds,
                                        const SamplingOptions& options);

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_FRAME_SAMPLER_H_
