// A deterministic synthetic video set whose classes differ only in how frames change over time,
// so that a single frame cannot tell them apart and the temporal head has to do the work.
#ifndef VIDCLF_TRAIN_SYNTHETIC_VIDEOS_H_
#define VIDCLF_TRAIN_SYNTHETIC_VIDEOS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "media/video_encoder.h"

namespace vidclf::train {

// The classes, in label order:
//   fade_in       a random texture brightens from near black
//   fade_out      it darkens to near black
//   hue_forward   its colours rotate one way around the hue circle
//   hue_backward  they rotate the other way
const std::vector<std::string>& SyntheticLabels();

struct SyntheticVideoOptions {
  int min_frames = 24;
  int max_frames = 48;
};

// The frames of video `index` of class `label` (an index into SyntheticLabels()). The same
// (label, index, seed) always gives the same frames: texture, size, length and speed are drawn
// from a generator seeded with all three.
std::vector<media::RgbImage> MakeSyntheticVideo(int label, int index, uint64_t seed,
                                                const SyntheticVideoOptions& options = {});

}  // namespace vidclf::train

#endif  // VIDCLF_TRAIN_SYNTHETIC_VIDEOS_H_
