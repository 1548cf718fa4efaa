// The path from encoded bytes to frame embeddings, shared by serving and by training so that a
// head is trained on exactly what the server will feed it.
#ifndef VIDCLF_PIPELINE_VIDEO_PIPELINE_H_
#define VIDCLF_PIPELINE_VIDEO_PIPELINE_H_

#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "media/byte_stream.h"
#include "media/clip_decoder.h"
#include "media/uri_allowlist.h"
#include "model/video_model.h"

namespace vidclf::pipeline {

struct EmbeddedVideo {
  torch::Tensor embeddings;  // [T, 512]
  std::vector<double> timestamps_seconds;
  double decode_seconds = 0;
  double preprocess_seconds = 0;
  double embed_seconds = 0;
};

// Where a video comes from: its bytes in memory, chunks arriving in a stream, or a URI that the
// server pulls when `allowlist` allows it. What is pointed to must outlive the decode.
struct VideoSource {
  static VideoSource Bytes(absl::string_view bytes) { return {bytes, nullptr, "", nullptr}; }
  static VideoSource Stream(media::ByteStream* stream) { return {"", stream, "", nullptr}; }
  static VideoSource Uri(std::string uri, const media::UriAllowlist* allowlist) {
    return {"", nullptr, std::move(uri), allowlist};
  }

  absl::StatusOr<media::DecodedClip> Decode(const media::ClipOptions& clip) const;

  absl::string_view bytes;
  media::ByteStream* stream = nullptr;
  std::string uri;
  const media::UriAllowlist* allowlist = nullptr;
};

// `clip` with its preprocessing replaced by the model's own (resize, crop, mean/std, layout), so
// that frames reach the backbone exactly as in training.
media::ClipOptions WithModelPreprocessing(const model::VideoModel& model, media::ClipOptions clip);

// `num_frames` preprocessed frames at `pixels` (media's layout for `channels_last`) as a
// [num_frames, 3, side, side] tensor that borrows them: channels-last frames become one by
// permuting the dimensions, without a copy.
torch::Tensor FramesTensor(float* pixels, int64_t num_frames, int64_t side, bool channels_last);

// Decodes `source` with `clip` (its limits, thread count and num_frames; the preprocessing is
// replaced by the model's own) and embeds the sampled frames with the model's backbone.
// DEADLINE_EXCEEDED when `deadline` passes between the stages.
absl::StatusOr<EmbeddedVideo> DecodeAndEmbed(const model::VideoModel& model,
                                             const VideoSource& source, media::ClipOptions clip,
                                             absl::Time deadline = absl::InfiniteFuture());

}  // namespace vidclf::pipeline

#endif  // VIDCLF_PIPELINE_VIDEO_PIPELINE_H_
