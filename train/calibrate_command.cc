// vidclf-train calibrate: the int8 backbone's activation ranges and input means, measured on
// frames of the work directory's own training clips, written beside its backbone
// (model/int8_calibration.h), from where eval --backbone-precision int8 reads them and export
// copies them into bundles.
#include <algorithm>
#include <iostream>

#include "absl/strings/str_format.h"
#include "model/int8_calibration.h"
#include "model/video_model.h"
#include "train/commands.h"
#include "train/embedding_cache.h"
#include "train/work_dir.h"

namespace vidclf::train {

void AddCalibrateFlags(CLI::App* app, CalibrateFlags* flags) {
  app->add_option("--work", flags->work, "Work directory that embed wrote.")->required();
  app->add_option("--frames", flags->frames,
                  "Frames to measure, from training clips spread over the split (held in "
                  "memory at once).")
      ->capture_default_str()
      ->check(CLI::Range(16, 2048));
}

int RunCalibrate(const CalibrateFlags& flags) {
  absl::StatusOr<Dataset> dataset = LoadWorkDataset(flags.work);
  absl::StatusOr<EmbeddingCache> cache =
      dataset.ok() ? OpenWorkCache(flags.work) : absl::StatusOr<EmbeddingCache>(dataset.status());
  if (!cache.ok()) {
    std::cerr << "vidclf-train calibrate: " << cache.status().message() << "\n";
    return kExitUsage;
  }
  absl::StatusOr<media::ClipOptions> options = SamplingOfSettings(cache->settings());
  absl::StatusOr<std::unique_ptr<model::VideoModel>> model =
      model::VideoModel::Load(cache->backbone_dir(), model::InferenceOptions::Exact());
  if (!options.ok() || !model.ok()) {
    std::cerr << "vidclf-train calibrate: "
              << (options.ok() ? model.status() : options.status()).message() << "\n";
    return kExitFailed;
  }
  const std::vector<Clip> clips = dataset->ClipsOf(Split::kTrain);
  if (clips.empty()) {
    std::cerr << "vidclf-train calibrate: no training clips in " << flags.work << "\n";
    return kExitUsage;
  }
  // Clips spread evenly over the split (which lists them class by class), so that every class
  // shows; as many as the frames need at the sampling's frames per clip.
  const int64_t per_clip = std::max<int64_t>(1, options->sampling.num_frames);
  const int64_t wanted_clips = std::max<int64_t>(1, (flags.frames + per_clip - 1) / per_clip);
  const double stride =
      std::max(1.0, static_cast<double>(clips.size()) / static_cast<double>(wanted_clips));
  std::vector<torch::Tensor> frames;
  int64_t count = 0, used = 0;
  for (double at = 0; count < flags.frames && at < static_cast<double>(clips.size());
       at += stride) {
    const Clip& clip = clips[static_cast<size_t>(at)];
    absl::StatusOr<torch::Tensor> decoded = DecodeClipFrames(**model, *dataset, clip, *options);
    if (!decoded.ok()) {
      std::cerr << "vidclf-train calibrate: skipping " << clip.path << ": "
                << decoded.status().message() << "\n";
      continue;
    }
    const torch::Tensor taken =
        decoded->narrow(0, 0, std::min(decoded->size(0), flags.frames - count));
    count += taken.size(0);
    ++used;
    frames.push_back(taken);
  }
  absl::StatusOr<model::Int8Calibration> calibration =
      model::CalibrateInt8((*model)->backbone(), frames);
  if (!calibration.ok()) {
    std::cerr << "vidclf-train calibrate: " << calibration.status().message() << "\n";
    return kExitFailed;
  }
  if (auto status = model::WriteInt8Calibration(*calibration, cache->backbone_dir());
      !status.ok()) {
    std::cerr << "vidclf-train calibrate: " << status.message() << "\n";
    return kExitFailed;
  }
  std::cout << absl::StrFormat(
      "wrote %s/%s: ranges of %d convolutions from %d frames of %d training clips\n",
      cache->backbone_dir(), model::kInt8CalibrationFile, calibration->output_max.size(),
      calibration->frames, used);
  return 0;
}

}  // namespace vidclf::train
