// The path from encoded bytes to frame embeddings, shared by serving and by training so that a
// head is trained on exactly what the server will feed it.
#ifndef VIDCLF_PIPELINE_VIDEO_PIPELINE_H_
#define VIDCLF_PIPELINE_VIDEO_PIPELINE_H_

#include <torch/torch.h>

#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "media/clip_options.h"
#include "media/video_source.h"
#include "model/video_model.h"

namespace vidclf::pipeline {

struct EmbeddedVideo {
  torch::Tensor embeddings;  // [T, 512], on the CPU
  std::vector<double> timestamps_seconds;
  double decode_seconds = 0;
  double preprocess_seconds = 0;
  double embed_seconds = 0;
};

// The model's own preprocessing (resize, crop, mean/std, layout), so that frames reach the
// backbone exactly as in training.
media::PreprocessOptions ModelPreprocessing(const model::VideoModel& model);
// `clip` with its preprocessing replaced by ModelPreprocessing(model).
media::ClipOptions WithModelPreprocessing(const model::VideoModel& model, media::ClipOptions clip);

// `num_frames` preprocessed frames at `pixels` (media's layout for `channels_last`) as a
// [num_frames, 3, side, side] tensor that borrows them: channels-last frames become one by
// permuting the dimensions, without a copy.
torch::Tensor FramesTensor(float* pixels, int64_t num_frames, int64_t side, bool channels_last);

// Decodes `source` with `clip` (its limits, thread count and num_frames; the preprocessing is
// replaced by the model's own) and embeds the sampled frames with the model's backbone.
// DEADLINE_EXCEEDED when `deadline` passes between the stages.
absl::StatusOr<EmbeddedVideo> DecodeAndEmbed(const model::VideoModel& model,
                                             const media::VideoSource& source,
                                             media::ClipOptions clip,
                                             absl::Time deadline = absl::InfiniteFuture());

}  // namespace vidclf::pipeline

#endif  // VIDCLF_PIPELINE_VIDEO_PIPELINE_H_
