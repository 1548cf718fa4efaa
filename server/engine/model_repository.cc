#include "server/engine/model_repository.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "media/quoted_text.h"

namespace vidclf::engine {
namespace {

namespace fs = std::filesystem;

// The versions of one model that hold a model.json, lowest first.
std::vector<std::string> VersionsOnDisk(const fs::path& model_dir) {
  std::vector<std::string> versions;
  for (const fs::directory_entry& entry : fs::directory_iterator(model_dir)) {
    if (entry.is_directory() && fs::exists(entry.path() / "model.json")) {
      versions.push_back(entry.path().filename().string());
    }
  }
  std::sort(versions.begin(), versions.end(), VersionLess);
  return versions;
}

}  // namespace

bool VersionLess(const std::string& a, const std::string& b) {
  int64_t x = 0;
  int64_t y = 0;
  if (absl::SimpleAtoi(a, &x) && absl::SimpleAtoi(b, &y)) return x < y;
  return a < b;
}

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
    std::vector<std::string> versions = VersionsOnDisk(entry.path());
    if (versions.empty()) continue;
    const fs::path bundle = entry.path() / versions.back();
    absl::StatusOr<std::unique_ptr<model::VideoModel>> model =
        model::VideoModel::Load(bundle, inference);
    if (!model.ok()) return model.status();
    const std::string name = (*model)->config().name;
    if (name != entry.path().filename().string()) {
      return absl::InvalidArgumentError(absl::StrCat(bundle.string(), " calls itself \"", name,
                                                     "\" but lies in the directory of \"",
                                                     entry.path().filename().string(), "\""));
    }
    repository->entries_[name] = Entry{*std::move(model), std::move(versions)};
  }
  if (repository->entries_.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no model bundle (<name>/<version>/model.json) in ", root));
  }
  repository->default_model_ =
      default_model.empty() ? repository->entries_.begin()->first : default_model;
  if (auto found = repository->Find(""); !found.ok()) return found.status();
  // Each backbone embeds one call's frames now, so that the first call does not wait for what is
  // built at first use: oneDNN's Winograd plan, about 100 ms; cuDNN's choice of kernels.
  std::set<const void*> warmed;
  for (const auto& [name, entry] : repository->entries_) {
    if (!warmed.insert(entry.model->backbone_key()).second) continue;
    const model::InputConfig& input = entry.model->config().input;
    const absl::StatusOr<torch::Tensor> embedded =
        entry.model->Embed(torch::zeros({input.num_frames, 3, input.crop_size, input.crop_size}));
    if (!embedded.ok()) return embedded.status();
  }
  return repository;
}

absl::StatusOr<const ModelRepository::Entry*> ModelRepository::FindEntry(
    absl::string_view name) const {
  // A name is refused, not looked up, when it holds what no model's name can: a NUL would
  // otherwise be cut off on the way somewhere, and the message quotes it.
  if (absl::Status plain = media::CheckPlainText("model name", name); !plain.ok()) return plain;
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    std::vector<std::string> names;
    for (const auto& [known, entry] : entries_) names.push_back(known);
    return absl::NotFoundError(absl::StrCat("no model named ", media::QuoteInput(name),
                                            "; this server has: ", absl::StrJoin(names, ", ")));
  }
  return &it->second;
}

absl::StatusOr<std::shared_ptr<const model::VideoModel>> ModelRepository::Find(
    absl::string_view name) const {
  absl::StatusOr<const Entry*> entry = FindEntry(name.empty() ? default_model_ : name);
  if (!entry.ok()) return entry.status();
  return (*entry)->model;
}

}  // namespace vidclf::engine
