// The files of a vidclf-train work directory, and reading its embeddings back as training sets.
//
//   WORK/dataset.json        the clips and their split (embed)
//   WORK/embed.json, WORK/backbone/, WORK/embeddings/   (embedding_cache.h)
//   WORK/skipped.txt         clips that could not be decoded, with the reason (embed)
//   WORK/runs/<run>/         a model bundle (model.json, head.pt, backbone.pt linked to the
//                            work directory's) with fit.json, curves.csv, curves.png (fit) and
//                            eval-<split>.json (eval)
#ifndef VIDCLF_TRAIN_WORK_DIR_H_
#define VIDCLF_TRAIN_WORK_DIR_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/train/head_trainer.h"
#include "train/dataset.h"
#include "train/embedding_cache.h"

namespace vidclf::train {

std::string DatasetPath(const std::string& work);
std::string RunDir(const std::string& work, const std::string& run);

// The data set and cache that `embed` left in `work`; FAILED_PRECONDITION saying to run embed
// first when there are none.
absl::StatusOr<Dataset> LoadWorkDataset(const std::string& work);

// The embedding cache that embed left in `work`, opened for the settings it recorded there.
absl::StatusOr<EmbeddingCache> OpenWorkCache(const std::string& work);

// The embedded clips of `split`, in data set order; clips that embed skipped are left out.
struct LoadedSplit {
  model::EmbeddingSet set;
  std::vector<Clip> clips;
};
absl::StatusOr<LoadedSplit> LoadSplit(const EmbeddingCache& cache, const Dataset& dataset,
                                      Split split);

absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path);
absl::Status WriteJsonFile(const nlohmann::json& json, const std::string& path);

}  // namespace vidclf::train

#endif  // VIDCLF_TRAIN_WORK_DIR_H_
