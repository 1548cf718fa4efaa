#include "media/frame_sampler.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>

#include "absl/strings/str_cat.h"

namespace vidclf::media {

absl::StatusOr<SamplingStrategy> ParseSamplingStrategy(const std::string& name) {
  if (name == "uniform") return SamplingStrategy::kUniform;
  if (name == "fps") return SamplingStrategy::kFps;
  if (name == "window") return SamplingStrategy::kWindow;
  if (name == "all") return SamplingStrategy::kAll;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown sampling strategy \"", name, "\"; known: uniform, fps, window, all"));
}

absl::Status ValidateSamplingOptions(const SamplingOptions& options) {
  if (options.num_frames < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling num_frames must be >= 0; got ", options.num_frames));
  }
  if (options.strategy == SamplingStrategy::kFps &&
      !(std::isfinite(options.frames_per_second) && options.frames_per_second > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("fps sampling needs frames_per_second > 0; got ", options.frames_per_second));
  }
  if (options.snap_to_keyframes && options.strategy != SamplingStrategy::kUniform) {
    return absl::InvalidArgumentError(
        "snap_to_keyframes applies to uniform sampling only, whose segments it snaps within");
  }
  if (options.strategy == SamplingStrategy::kWindow) {
    if (options.stride_frames < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("window sampling needs stride_frames >= 1; got ", options.stride_frames));
    }
    if (!(std::isfinite(options.start_seconds) && options.start_seconds >= 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("window sampling needs start_seconds >= 0; got ", options.start_seconds));
    }
  }
  return absl::OkStatus();
}

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

std::vector<int64_t> SnapToKeyframes(std::vector<int64_t> uniform, int64_t total_frames,
                                     const std::vector<int64_t>& keyframes) {
  const auto n = static_cast<int64_t>(uniform.size());
  if (n == 0 || n >= total_frames) return uniform;  // every frame is kept already
  for (int64_t i = 0; i < n; ++i) {
    const int64_t begin = i * total_frames / n;
    const int64_t end = (i + 1) * total_frames / n;
    const int64_t centre = uniform[i];
    // The keyframes either side of the centre, within the segment.
    const auto after = std::lower_bound(keyframes.begin(), keyframes.end(), centre);
    int64_t best = -1;
    if (after != keyframes.end() && *after < end) best = *after;
    if (after != keyframes.begin() && *std::prev(after) >= begin &&
        (best < 0 || centre - *std::prev(after) <= best - centre)) {
      best = *std::prev(after);
    }
    if (best >= 0) uniform[i] = best;
  }
  return uniform;
}

std::vector<int64_t> SampleFrameIndices(const std::vector<double>& timestamps_seconds,
                                        const SamplingOptions& options) {
  const auto total = static_cast<int64_t>(timestamps_seconds.size());
  const int64_t cap = options.num_frames > 0 ? options.num_frames : total;
  std::vector<int64_t> indices;
  switch (options.strategy) {
    case SamplingStrategy::kUniform:
      return UniformSampleIndices(total, options.num_frames);
    case SamplingStrategy::kAll:
      for (int64_t i = 0; i < std::min(cap, total); ++i) indices.push_back(i);
      return indices;
    case SamplingStrategy::kFps: {
      // Intervals are counted from the first frame's time, so a stream starting late still keeps
      // its first frame.
      const double origin = timestamps_seconds.empty() ? 0 : timestamps_seconds.front();
      int64_t last_interval = -1;
      for (int64_t i = 0; i < total && static_cast<int64_t>(indices.size()) < cap; ++i) {
        const auto interval = static_cast<int64_t>(
            std::floor((timestamps_seconds[i] - origin) * options.frames_per_second + 1e-9));
        if (interval > last_interval) {
          indices.push_back(i);
          last_interval = interval;
        }
      }
      return indices;
    }
    case SamplingStrategy::kWindow: {
      const int64_t first = std::lower_bound(timestamps_seconds.begin(), timestamps_seconds.end(),
                                             options.start_seconds - 1e-9) -
                            timestamps_seconds.begin();
      for (int64_t i = first; i < total && static_cast<int64_t>(indices.size()) < cap;
           i += options.stride_frames) {
        indices.push_back(i);
      }
      return indices;
    }
  }
  return indices;
}

}  // namespace vidclf::media
