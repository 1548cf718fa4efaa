#include "server/engine/model_repository.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace vidclf::engine {
namespace {

namespace fs = std::filesystem;

bool VersionLess(const std::string& a, const std::string& b) {
  int64_t x = 0;
  int64_t y = 0;
  if (absl::SimpleAtoi(a, &x) && absl::SimpleAtoi(b, &y)) return x < y;
  return a < b;
}

// The directory of the highest version of one model, or empty if it has none.
fs::path LatestVersion(const fs::path& model_dir) {
  fs::path latest;
  std::string latest_version;
  for (const fs::directory_entry& entry : fs::directory_iterator(model_dir)) {
    const std::string version = entry.path().filename().string();
    if (!entry.is_directory() || !fs::exists(entry.path() / "model.json")) continue;
    if (latest.empty() || VersionLess(latest_version, version)) {
      latest = entry.path();
      latest_version = version;
    }
  }
  return latest;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelRepository>> ModelRepository::Load(
    const std::string& root, const std::string& default_model,
    const model::InferenceOptions& inference) {
  std::error_code error;
  if (!fs::is_directory(root, error)) {
    return absl::NotFoundError(absl::StrCat("model repository ", root, " is not a directory"));
  }
  std::unique_ptr<ModelRepository> repository(new ModelRepository());
  for (const fs::directory_entry& entry : fs::directory_iterator(root)) {
    if (!entry.is_directory()) continue;
    const fs::path bundle = LatestVersion(entry.path());
    if (bundle.empty()) continue;
    absl::StatusOr<std::unique_ptr<model::VideoModel>> model =
        model::VideoModel::Load(bundle, inference);
    if (!model.ok()) return model.status();
    const std::string name = (*model)->config().name;
    if (name != entry.path().filename().string()) {
      return absl::InvalidArgumentError(absl::StrCat(bundle.string(), " calls itself \"", name,
                                                     "\" but lies in the directory of \"",
                                                     entry.path().filename().string(), "\""));
    }
    repository->models_[name] = *std::move(model);
  }
  if (repository->models_.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no model bundle (<name>/<version>/model.json) in ", root));
  }
  repository->default_model_ =
      default_model.empty() ? repository->models_.begin()->first : default_model;
  if (auto found = repository->Find(""); !found.ok()) return found.status();
  return repository;
}

absl::StatusOr<const model::VideoModel*> ModelRepository::Find(absl::string_view name) const {
  if (name.empty()) name = default_model_;
  auto it = models_.find(name);
  if (it == models_.end()) {
    std::vector<std::string> names;
    for (const auto& [known, model] : models_) names.push_back(known);
    return absl::NotFoundError(absl::StrCat("no model named \"", name,
                                            "\"; this server has: ", absl::StrJoin(names, ", ")));
  }
  return it->second.get();
}

std::vector<const model::VideoModel*> ModelRepository::models() const {
  std::vector<const model::VideoModel*> all;
  for (const auto& [name, model] : models_) all.push_back(model.get());
  return all;
}

}  // namespace vidclf::engine
