#include "train/work_dir.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/json_text.h"
#include "train/timeline_dataset.h"

namespace vidclf::train {

namespace fs = std::filesystem;

std::string DatasetPath(const std::string& work) {
  return (fs::path(work) / "dataset.json").string();
}

std::string RunDir(const std::string& work, const std::string& run) {
  return (fs::path(work) / "runs" / run).string();
}

absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  nlohmann::json json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return absl::DataLossError(absl::StrCat(path, " is not valid JSON"));
  return json;
}

absl::Status WriteJsonFile(const nlohmann::json& json, const std::string& path) {
  const std::string partial = path + ".partial";
  {
    std::ofstream out(partial);
    out << JsonText(json, 2) << "\n";
    if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
  }
  std::error_code error;
  fs::rename(partial, path, error);
  if (error)
    return absl::PermissionDeniedError(absl::StrCat("cannot write ", path, ": ", error.message()));
  return absl::OkStatus();
}

absl::StatusOr<Dataset> LoadWorkDataset(const std::string& work) {
  if (!fs::exists(DatasetPath(work))) {
    return absl::FailedPreconditionError(
        absl::StrCat(work, " holds no embedded data set; run `vidclf-train embed --work ", work,
                     " --data DIR` first"));
  }
  absl::StatusOr<nlohmann::json> json = ReadJsonFile(DatasetPath(work));
  if (!json.ok()) return json.status();
  return DatasetFromJson(*json);
}

absl::StatusOr<EmbeddingCache> OpenWorkCache(const std::string& work) {
  absl::StatusOr<nlohmann::json> settings = ReadJsonFile((fs::path(work) / "embed.json").string());
  if (!settings.ok()) return settings.status();
  return EmbeddingCache::Open(work, *settings);
}

absl::StatusOr<LoadedSplit> LoadSplit(const EmbeddingCache& cache, const Dataset& dataset,
                                      Split split) {
  LoadedSplit loaded;
  std::vector<torch::Tensor> embeddings;
  std::vector<int64_t> labels;
  std::vector<std::vector<int64_t>> frame_labels;
  const double frames_per_second = cache.frames_per_second();
  for (const Clip& clip : dataset.ClipsOf(split)) {
    if (!cache.Has(clip)) continue;  // skipped by embed: undecodable
    absl::StatusOr<torch::Tensor> tensor = cache.Get(clip);
    if (!tensor.ok()) return tensor.status();
    if (dataset.HasTimelines()) {
      // Sampling keeps one frame of each 1 / frames_per_second, and labels are read at those
      // times: fewer frames than its segments span would shift every label after a gap.
      const int64_t frames = tensor->size(0);
      const double spanned = clip.segments.back().end_seconds * frames_per_second;
      if (static_cast<double>(frames) < spanned - 2) {
        return absl::FailedPreconditionError(absl::StrFormat(
            "%s: %d frames sampled at %g/s, but its segments end at %.3f s (%.0f frames): its "
            "frame rate is below the sampling rate, or the truth describes a longer video",
            clip.path, frames, frames_per_second, clip.segments.back().end_seconds, spanned));
      }
      frame_labels.push_back(FrameLabels(clip, frames, frames_per_second));
    }
    embeddings.push_back(*tensor);
    labels.push_back(clip.label);
    loaded.clips.push_back(clip);
  }
  loaded.set = dataset.HasTimelines() ? model::MakeFrameEmbeddingSet(embeddings, frame_labels)
                                      : model::MakeEmbeddingSet(embeddings, labels);
  return loaded;
}

}  // namespace vidclf::train
