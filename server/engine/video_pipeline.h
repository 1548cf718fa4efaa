// The path from encoded bytes to frame embeddings, shared by serving and by training so that a
// head is trained on exactly what the server will feed it.
#ifndef VIDCLF_SERVER_ENGINE_VIDEO_PIPELINE_H_
#define VIDCLF_SERVER_ENGINE_VIDEO_PIPELINE_H_

#include <torch/torch.h>

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "media/clip_decoder.h"
#include "model/video_model.h"

namespace vidclf::engine {

struct EmbeddedVideo {
  torch::Tensor embeddings;  // [T, 512]
  std::vector<double> timestamps_seconds;
  double decode_seconds = 0;
  double preprocess_seconds = 0;
  double embed_seconds = 0;
};

// Decodes `video` with `clip` (its limits, thread count and num_frames; the preprocessing is
// replaced by the model's own) and embeds the sampled frames with the model's backbone.
// DEADLINE_EXCEEDED when `deadline` passes between the stages.
absl::StatusOr<EmbeddedVideo> DecodeAndEmbed(const model::VideoModel& model,
                                             absl::string_view video, media::ClipOptions clip,
                                             absl::Time deadline = absl::InfiniteFuture());

}  // namespace vidclf::engine

#endif  // VIDCLF_SERVER_ENGINE_VIDEO_PIPELINE_H_
