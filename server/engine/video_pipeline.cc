#include "server/engine/video_pipeline.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace vidclf::engine {

absl::StatusOr<EmbeddedVideo> DecodeAndEmbed(const model::VideoModel& model,
                                             absl::string_view video, media::ClipOptions clip,
                                             absl::Time deadline) {
  const model::InputConfig& input = model.config().input;
  clip.preprocess.resize_shorter_side = input.resize_shorter_side;
  clip.preprocess.crop_size = input.crop_size;
  clip.preprocess.mean = input.mean;
  clip.preprocess.std = input.std;
  absl::StatusOr<media::DecodedClip> decoded = media::DecodeClip(video, clip);
  if (!decoded.ok()) return decoded.status();
  if (absl::Now() >= deadline) {
    return absl::DeadlineExceededError("deadline passed after decoding, before embedding");
  }

  EmbeddedVideo result;
  result.decode_seconds = decoded->decode_seconds;
  result.preprocess_seconds = decoded->preprocess_seconds;
  result.timestamps_seconds = std::move(decoded->timestamps_seconds);
  const auto start = std::chrono::steady_clock::now();
  // from_blob borrows the decoded pixels, which outlive the call.
  const torch::Tensor frames = torch::from_blob(
      decoded->pixels.data(), {decoded->num_frames, 3, decoded->crop_size, decoded->crop_size});
  absl::StatusOr<torch::Tensor> embeddings = model.Embed(frames);
  if (!embeddings.ok()) return embeddings.status();
  result.embeddings = *std::move(embeddings);
  result.embed_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace vidclf::engine
