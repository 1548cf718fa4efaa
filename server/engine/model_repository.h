// The models a server serves: every bundle under a repository directory, loaded at start and
// loaded again, as a new repository, when the server is asked to reload.
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

// Immutable after Load, so any number of threads may call it at once. Models are shared: a call
// holds its model while it runs, so a reload never pulls one from under a call in flight.
class ModelRepository {
 public:
  struct Entry {
    std::shared_ptr<const model::VideoModel> model;  // the highest version, which is served
    std::vector<std::string> versions;               // every version on disk, lowest first
  };

  // Loads REPO/<name>/<version>/ for every model name, taking the highest version of each
  // (versions compare as integers when both are numeric, else as text). `default_model` names
  // the model used when a request names none; empty picks the first name in alphabetical order.
  // Fails when the directory holds no bundle, or any bundle does not load. Every model runs as
  // `inference` says (device, precision, layout); each distinct backbone embeds one call's frames
  // of zeros before Load returns, so that what is built at first use is ready.
  static absl::StatusOr<std::unique_ptr<ModelRepository>> Load(
      const std::string& root, const std::string& default_model,
      const model::InferenceOptions& inference = {});

  // The model called `name`, or the default model when `name` is empty. NOT_FOUND lists the
  // models there are.
  absl::StatusOr<std::shared_ptr<const model::VideoModel>> Find(absl::string_view name) const;
  // The entry of model `name` (no default); NOT_FOUND as Find.
  absl::StatusOr<const Entry*> FindEntry(absl::string_view name) const;

  // By name.
  const std::map<std::string, Entry, std::less<>>& entries() const { return entries_; }
  const std::string& default_model() const { return default_model_; }

 private:
  ModelRepository() = default;

  std::map<std::string, Entry, std::less<>> entries_;
  std::string default_model_;
};

// Whether version `a` sorts before `b`: as integers when both are numeric, else as text.
bool VersionLess(const std::string& a, const std::string& b);

}  // namespace vidclf::engine

#endif  // VIDCLF_SERVER_ENGINE_MODEL_REPOSITORY_H_
