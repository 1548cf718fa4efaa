// vidclf-seeded-repository: a model repository of the same configurations as another, with
// seeded random weights. A GPU machine can neither build the demo repository (vidclf-train needs
// cairo, which bench/gpu/serve.sh does not carry) nor receive it (each backbone is 47 MB), so it
// reads the demo's model.json files and makes bundles that run exactly the same computation:
// the same backbone, head, frames and crop. Their predictions mean nothing.
//
//   vidclf-seeded-repository --configs DIR --output REPO [--seed N]
//
// DIR is laid out as a repository, NAME/VERSION/model.json; only the model.json files are read.
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "model/model_config.h"
#include "model/video_model.h"

ABSL_FLAG(std::string, configs, "", "Directory of NAME/VERSION/model.json files.");
ABSL_FLAG(std::string, output, "", "Repository to write the bundles into.");
ABSL_FLAG(int, seed, 1, "Seeds every bundle's weights.");

namespace {

namespace fs = std::filesystem;

// Writes OUTPUT/NAME/VERSION/ for the model.json at `path` (DIR/NAME/VERSION/model.json).
absl::Status WriteSeededBundle(const fs::path& path, const fs::path& output, int seed) {
  std::ifstream file(path);
  const nlohmann::json json = nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), " is not JSON"));
  }
  auto config = vidclf::model::ModelConfigFromJson(json);
  if (!config.ok()) return config.status();
  torch::manual_seed(seed);
  auto model = vidclf::model::VideoModel::Create(*config);
  if (!model.ok()) return model.status();
  const fs::path bundle =
      output / path.parent_path().parent_path().filename() / path.parent_path().filename();
  if (absl::Status saved = (*model)->Save(bundle.string()); !saved.ok()) return saved;
  std::cout << bundle.string() << "\n";
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const fs::path configs = absl::GetFlag(FLAGS_configs);
  const fs::path output = absl::GetFlag(FLAGS_output);
  if (configs.empty() || output.empty()) {
    std::cerr << "usage: vidclf-seeded-repository --configs DIR --output REPO [--seed N]\n";
    return 2;
  }
  int written = 0;
  std::error_code error;
  for (const auto& entry : fs::recursive_directory_iterator(configs, error)) {
    if (entry.path().filename() != "model.json") continue;
    if (absl::Status status = WriteSeededBundle(entry.path(), output, absl::GetFlag(FLAGS_seed));
        !status.ok()) {
      std::cerr << "vidclf-seeded-repository: " << entry.path().string() << ": " << status << "\n";
      return 1;
    }
    ++written;
  }
  if (error || written == 0) {
    std::cerr << "vidclf-seeded-repository: no NAME/VERSION/model.json under " << configs.string()
              << "\n";
    return 1;
  }
  return 0;
}
