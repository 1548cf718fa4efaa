#include "server/engine/video_pipeline.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace vidclf::engine {

absl::StatusOr<media::DecodedClip> VideoSource::Decode(const media::ClipOptions& clip) const {
  if (stream != nullptr) return media::DecodeClipFromStream(*stream, clip);
  if (!uri.empty()) return media::DecodeClipFromUri(uri, *allowlist, clip);
  return media::DecodeClip(bytes, clip);
}

absl::StatusOr<EmbeddedVideo> DecodeAndEmbed(const model::VideoModel& model,
                                             const VideoSource& source, media::ClipOptions clip,
                                             absl::Time deadline) {
  const model::InputConfig& input = model.config().input;
  clip.preprocess.resize_shorter_side = input.resize_shorter_side;
  clip.preprocess.crop_size = input.crop_size;
  clip.preprocess.mean = input.mean;
  clip.preprocess.std = input.std;
  clip.preprocess.channels_last = model.channels_last();
  absl::StatusOr<media::DecodedClip> decoded = source.Decode(clip);
  if (!decoded.ok()) return decoded.status();
  if (absl::Now() >= deadline) {
    return absl::DeadlineExceededError("deadline passed after decoding, before embedding");
  }

  EmbeddedVideo result;
  result.decode_seconds = decoded->decode_seconds;
  result.preprocess_seconds = decoded->preprocess_seconds;
  result.timestamps_seconds = std::move(decoded->timestamps_seconds);
  const auto start = std::chrono::steady_clock::now();
  // from_blob borrows the decoded pixels, which outlive the call. Interleaved pixels are already
  // a channels-last [T, 3, crop, crop] tensor once the dimensions are permuted: no copy.
  const int64_t side = decoded->crop_size;
  const torch::Tensor frames =
      clip.preprocess.channels_last
          ? torch::from_blob(decoded->pixels.data(), {decoded->num_frames, side, side, 3})
                .permute({0, 3, 1, 2})
          : torch::from_blob(decoded->pixels.data(), {decoded->num_frames, 3, side, side});
  absl::StatusOr<torch::Tensor> embeddings = model.Embed(frames);
  if (!embeddings.ok()) return embeddings.status();
  result.embeddings = *std::move(embeddings);
  result.embed_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace vidclf::engine
