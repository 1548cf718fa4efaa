// Chooses, as a feed's frames come one by one, which of them to embed.
#ifndef VIDCLF_MEDIA_FEED_SAMPLER_H_
#define VIDCLF_MEDIA_FEED_SAMPLER_H_

#include <cmath>
#include <cstdint>

namespace vidclf::media {

class FeedSampler {
 public:
  // Every embed_stride-th frame (indices 0, k, 2k, ...; embed_stride >= 1), or, when sample_fps
  // > 0, the first frame at or after each multiple of 1 / sample_fps seconds of media time,
  // however the frame rate varies.
  FeedSampler(int embed_stride, double sample_fps)
      : embed_stride_(embed_stride), sample_fps_(sample_fps) {}

  // Whether the frame decoded `index`-th, at `seconds`, is one to embed. Frames come in order.
  bool Takes(double seconds, int64_t index) {
    if (sample_fps_ <= 0) return index % embed_stride_ == 0;
    // A microsecond's slack, so that a frame timed at k / sample_fps is not missed by rounding.
    constexpr double kSlack = 1e-6;
    if (seconds + kSlack < next_sample_seconds_) return false;
    next_sample_seconds_ = (std::floor((seconds + kSlack) * sample_fps_) + 1) / sample_fps_;
    return true;
  }

 private:
  const int embed_stride_;
  const double sample_fps_;
  double next_sample_seconds_ = 0;
};

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_FEED_SAMPLER_H_
