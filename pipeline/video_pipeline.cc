#include "pipeline/video_pipeline.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "media/clip_decoder.h"

namespace vidclf::pipeline {

media::PreprocessOptions ModelPreprocessing(const model::VideoModel& model) {
  const model::InputConfig& input = model.config().input;
  media::PreprocessOptions preprocess;
  preprocess.resize_shorter_side = input.resize_shorter_side;
  preprocess.crop_size = input.crop_size;
  preprocess.mean = input.mean;
  preprocess.std = input.std;
  preprocess.channels_last = model.channels_last();
  return preprocess;
}

media::ClipOptions WithModelPreprocessing(const model::VideoModel& model, media::ClipOptions clip) {
  clip.preprocess = ModelPreprocessing(model);
  return clip;
}

torch::Tensor FramesTensor(float* pixels, int64_t num_frames, int64_t side, bool channels_last) {
  return channels_last ? torch::from_blob(pixels, {num_frames, side, side, 3}).permute({0, 3, 1, 2})
                       : torch::from_blob(pixels, {num_frames, 3, side, side});
}

absl::StatusOr<EmbeddedVideo> DecodeAndEmbed(const model::VideoModel& model,
                                             const media::VideoSource& source,
                                             media::ClipOptions clip, absl::Time deadline) {
  clip = WithModelPreprocessing(model, std::move(clip));
  absl::StatusOr<media::DecodedClip> decoded = media::DecodeClip(source, clip);
  if (!decoded.ok()) return decoded.status();
  if (absl::Now() >= deadline) {
    return absl::DeadlineExceededError("deadline passed after decoding, before embedding");
  }

  EmbeddedVideo result;
  result.decode_seconds = decoded->decode_seconds;
  result.preprocess_seconds = decoded->preprocess_seconds;
  result.timestamps_seconds = std::move(decoded->timestamps_seconds);
  const auto start = std::chrono::steady_clock::now();
  // The tensor borrows the decoded pixels, which outlive the call.
  const torch::Tensor frames = FramesTensor(decoded->pixels.data(), decoded->num_frames,
                                            decoded->crop_size, clip.preprocess.channels_last);
  absl::StatusOr<torch::Tensor> embeddings = model.Embed(frames);
  if (!embeddings.ok()) return embeddings.status();
  result.embeddings = embeddings->cpu();  // waits for a GPU's
  result.embed_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace vidclf::pipeline
