// The models a server serves: every bundle under a repository directory, loaded at start.
#ifndef VIDCLF_SERVER_ENGINE_MODEL_REPOSITORY_H_
#define VIDCLF_SERVER_ENGINE_MODEL_REPOSITORY_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/video_model.h"

namespace vidclf::engine {

// Immutable after Load, so any number of threads may call Find at once.
class ModelRepository {
 public:
  // Loads REPO/<name>/<version>/ for every model name, taking the highest version of each
  // (versions compare as integers when both are numeric, else as text). `default_model` names
  // the model used when a request names none; empty picks the first name in alphabetical order.
  // Fails when the directory holds no bundle, or any bundle does not load. Every model runs as
  // `inference` says (device, precision, layout).
  static absl::StatusOr<std::unique_ptr<ModelRepository>> Load(
      const std::string& root, const std::string& default_model,
      const model::InferenceOptions& inference = {});

  // The model called `name`, or the default model when `name` is empty. NOT_FOUND lists the
  // models there are.
  absl::StatusOr<const model::VideoModel*> Find(absl::string_view name) const;

  std::vector<const model::VideoModel*> models() const;
  const std::string& default_model() const { return default_model_; }

 private:
  ModelRepository() = default;

  std::map<std::string, std::unique_ptr<model::VideoModel>, std::less<>> models_;
  std::string default_model_;
};

}  // namespace vidclf::engine

#endif  // VIDCLF_SERVER_ENGINE_MODEL_REPOSITORY_H_
