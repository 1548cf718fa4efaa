// A deterministic synthetic video set whose classes come in pairs that differ only in the order
// or the rate of change over time, so that a single frame cannot tell a pair apart and the
// temporal head has to do the work.
#ifndef VIDCLF_TRAIN_SYNTHETIC_VIDEOS_H_
#define VIDCLF_TRAIN_SYNTHETIC_VIDEOS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "media/video_encoder.h"

namespace vidclf::train {

// The ten classes, in label order; labels 2k and 2k + 1 form a pair:
//   fade_in       a random texture brightens from near black
//   fade_out      it darkens to near black (fade_in played backwards)
//   hue_forward   its colours rotate one way around the hue circle
//   hue_backward  they rotate the other way (hue_forward played backwards)
//   zoom_in       the texture is magnified 2.5 to 4 times over the clip
//   zoom_out      it shrinks by as much (zoom_in played backwards)
//   flicker_slow  its brightness oscillates once over the whole clip
//   flicker_fast  it oscillates four times over the whole clip
//   focus_in      a strong blur clears to sharp
//   focus_out     a sharp texture blurs (focus_in played backwards)
// Rates are relative to the clip's length, so a uniform sample of 16 frames from a clip of any
// length sees the same change.
const std::vector<std::string>& SyntheticLabels();

struct SyntheticVideoOptions {
  // Each video's frame count is drawn from [min_frames, max_frames]; 1 <= min <= max.
  int min_frames = 24;
  int max_frames = 48;
};

// How a video is stored: drawn with the rest of its nuisance (see MakeSyntheticVideo).
struct SyntheticVideoFormat {
  int width = 0;  // even, 96..192
  int height = 0;
  int num_frames = 0;
  // Container, codec, frame rate (10, 12, 15, 24 or 25) and quantiser for media::EncodeVideo.
  media::EncodeOptions encode;
  // File extension without the dot: "mp4", "avi" or "mkv".
  std::string extension;
};

// The format of video `index` of class `label`, without rendering it. Codecs, per video, from:
// mpeg4 in MP4, mpeg4 in AVI, MJPEG in AVI and H.264 (libx264) in Matroska; where the linked
// libavcodec has no libx264, those videos use mpeg4 in Matroska instead.
SyntheticVideoFormat DescribeSyntheticVideo(int label, int index, uint64_t seed,
                                            const SyntheticVideoOptions& options = {});

// The frames of video `index` of class `label` (an index into SyntheticLabels(); any other label
// gives no frames). The same (label, index, seed, options) always gives the same frames.
// Everything but the temporal effect (texture, colours, position, pixel noise, length, size,
// frame rate, codec, the effect's strength) is drawn from a generator seeded with (seed, pair,
// index), where pair = label / 2: videos of the same index in the two classes of a pair share
// that draw and differ only in time. For the reversed pairs the second class's frame f equals the
// first class's frame num_frames - 1 - f exactly; the flicker pair shares its first frame.
std::vector<media::RgbImage> MakeSyntheticVideo(int label, int index, uint64_t seed,
                                                const SyntheticVideoOptions& options = {});

}  // namespace vidclf::train

#endif  // VIDCLF_TRAIN_SYNTHETIC_VIDEOS_H_
