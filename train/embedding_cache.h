// The embedding cache of a training work directory: one [T, 512] tensor per clip, made by the
// server's own decode and preprocessing path (pipeline/video_pipeline.h), so that a head is
// trained on exactly what the server will feed it.
//
//   WORK/embed.json                 what the embeddings depend on (input, sampling, backbone)
//   WORK/backbone/                  a bundle holding the backbone that made them
//   WORK/embeddings/<class>/<file>.pt
//
// Each tensor is written to a temporary name and renamed, so an interrupted run leaves only
// whole files, and the next run embeds only the clips that are missing.
#ifndef VIDCLF_TRAIN_EMBEDDING_CACHE_H_
#define VIDCLF_TRAIN_EMBEDDING_CACHE_H_

#include <torch/torch.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "media/clip_decoder.h"
#include "model/video_model.h"
#include "train/dataset.h"

namespace vidclf::train {

class EmbeddingCache {
 public:
  // Opens the cache in `work_dir` for embeddings made under `settings` (any JSON that captures
  // what they depend on). A cache made under other settings is FAILED_PRECONDITION naming the
  // first difference: mixing them would train on inconsistent inputs.
  static absl::StatusOr<EmbeddingCache> Open(const std::string& work_dir,
                                             const nlohmann::json& settings);

  const std::string& work_dir() const { return work_dir_; }
  // What its embeddings depend on (embed.json).
  const nlohmann::json& settings() const { return settings_; }
  // The rate of fps sampling the cache was made with (timelines); 0 for uniform sampling.
  double frames_per_second() const {
    return settings_.at("sampling").value("frames_per_second", 0.0);
  }
  std::string backbone_dir() const;
  std::string PathFor(const Clip& clip) const;
  bool Has(const Clip& clip) const;
  absl::Status Put(const Clip& clip, const torch::Tensor& embeddings) const;
  absl::StatusOr<torch::Tensor> Get(const Clip& clip) const;

 private:
  EmbeddingCache(std::string work_dir, nlohmann::json settings)
      : work_dir_(std::move(work_dir)), settings_(std::move(settings)) {}
  std::string work_dir_;
  nlohmann::json settings_;
};

struct SkippedClip {
  std::string path;
  std::string reason;
};

struct EmbedReport {
  int64_t embedded = 0;  // this run
  int64_t reused = 0;    // already in the cache
  std::vector<SkippedClip> skipped;
  double seconds = 0;
};

// The sampling a cache's `settings` (its embed.json) record, as the clip options that made its
// embeddings (one decoder thread); INVALID_ARGUMENT when they record none.
absl::StatusOr<media::ClipOptions> SamplingOfSettings(const nlohmann::json& settings);

// The frames of `clip` of `dataset`, decoded with `clip_options`'s sampling and `model`'s
// preprocessing, as embedding decodes them: [T, 3, S, S] on the host.
absl::StatusOr<torch::Tensor> DecodeClipFrames(const model::VideoModel& model,
                                               const Dataset& dataset, const Clip& clip,
                                               const media::ClipOptions& clip_options);

// Embeds `clips` of `dataset` with `model`'s backbone, `jobs` clips at a time, into memory: one
// [T, 512] host tensor each, in order. Fails with the first clip that cannot be read or decoded.
absl::StatusOr<std::vector<torch::Tensor>> EmbedClips(const model::VideoModel& model,
                                                      const Dataset& dataset,
                                                      const std::vector<Clip>& clips,
                                                      const media::ClipOptions& clip_options,
                                                      int jobs);

// Embeds every clip of `dataset` that the cache lacks with `model`'s backbone, `jobs` clips at a
// time, drawing a progress line. A clip that cannot be read or decoded is skipped and listed,
// never fatal. `clip_options` carries the sampling; its preprocessing is replaced by the model's.
absl::StatusOr<EmbedReport> EmbedDataset(const model::VideoModel& model, const Dataset& dataset,
                                         const media::ClipOptions& clip_options,
                                         const EmbeddingCache& cache, int jobs);

}  // namespace vidclf::train

#endif  // VIDCLF_TRAIN_EMBEDDING_CACHE_H_
