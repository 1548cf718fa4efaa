#include "model/video_model.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/heads/gru_head.h"
#include "model/heads/transformer_head.h"

namespace vidclf::model {
namespace {

constexpr char kConfigFile[] = "model.json";
constexpr char kBackboneFile[] = "backbone.pt";
constexpr char kHeadFile[] = "head.pt";

// Throws c10::Error when the head's options are inconsistent.
std::shared_ptr<TemporalHead> MakeHead(const ModelConfig& config) {
  const auto num_classes = static_cast<int64_t>(config.labels.size());
  if (config.head == "transformer") {
    const TransformerHeadConfig& t = config.transformer;
    return TransformerHead(TransformerHeadOptions(num_classes)
                               .input_size(kResNet18EmbeddingSize)
                               .d_model(t.d_model)
                               .num_heads(t.num_heads)
                               .num_layers(t.num_layers)
                               .ffn_size(t.ffn_size)
                               .pre_norm(t.pre_norm)
                               .pooling(t.pooling)
                               .dropout(t.dropout)
                               .attention(t.attention))
        .ptr();
  }
  return GruHead(GruHeadOptions(num_classes)
                     .input_size(kResNet18EmbeddingSize)
                     .hidden_size(config.gru.hidden_size)
                     .num_layers(config.gru.num_layers)
                     .mlp_hidden_size(config.gru.mlp_hidden_size))
      .ptr();
}

// torch::load replaces each tensor wholesale, shape included, so a file written for another
// configuration would load silently; compare every shape against the freshly built module.
template <typename Module>
absl::Status LoadWeights(Module& module, const std::filesystem::path& path) {
  std::map<std::string, std::vector<int64_t>> expected;
  for (const auto& item : module->named_parameters())
    expected[item.key()] = item.value().sizes().vec();
  for (const auto& item : module->named_buffers())
    expected[item.key()] = item.value().sizes().vec();
  torch::load(module, path.string());
  auto check = [&](const auto& items) -> absl::Status {
    for (const auto& item : items) {
      const std::vector<int64_t> shape = item.value().sizes().vec();
      if (shape != expected[item.key()]) {
        return absl::InvalidArgumentError(
            absl::StrCat("cannot load the weights in ", path.string(), ": ", item.key(),
                         " has shape [", absl::StrJoin(shape, ", "), "] but model.json implies [",
                         absl::StrJoin(expected[item.key()], ", "), "]"));
      }
    }
    return absl::OkStatus();
  };
  if (auto status = check(module->named_parameters()); !status.ok()) return status;
  return check(module->named_buffers());
}

}  // namespace

VideoModel::VideoModel(ModelConfig config, ResNet18 backbone, std::shared_ptr<TemporalHead> head)
    : config_(std::move(config)), backbone_(std::move(backbone)), head_(std::move(head)) {
  backbone_->eval();
  head_->eval();
}

absl::StatusOr<std::unique_ptr<VideoModel>> VideoModel::Create(const ModelConfig& config) {
  try {
    return std::unique_ptr<VideoModel>(new VideoModel(config, ResNet18(), MakeHead(config)));
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot build model: ", e.what_without_backtrace()));
  }
}

absl::StatusOr<std::unique_ptr<VideoModel>> VideoModel::Load(const std::string& bundle_dir) {
  const std::filesystem::path dir(bundle_dir);
  std::ifstream config_stream(dir / kConfigFile);
  if (!config_stream) {
    return absl::NotFoundError(absl::StrCat("no ", kConfigFile, " in ", bundle_dir));
  }
  nlohmann::json json = nlohmann::json::parse(config_stream, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return absl::InvalidArgumentError(
        absl::StrCat((dir / kConfigFile).string(), " is not valid JSON"));
  }
  absl::StatusOr<ModelConfig> config = ModelConfigFromJson(json);
  if (!config.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(bundle_dir, ": ", config.status().message()));
  }
  ResNet18 backbone;
  std::shared_ptr<TemporalHead> head;
  try {
    head = MakeHead(*config);
    if (auto status = LoadWeights(backbone, dir / kBackboneFile); !status.ok()) return status;
    if (auto status = LoadWeights(head, dir / kHeadFile); !status.ok()) return status;
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load the weights in ", bundle_dir, ": ", e.what_without_backtrace()));
  }
  return std::unique_ptr<VideoModel>(
      new VideoModel(*std::move(config), std::move(backbone), std::move(head)));
}

absl::Status VideoModel::Save(const std::string& bundle_dir) const {
  const std::filesystem::path dir(bundle_dir);
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create ", bundle_dir, ": ", error.message()));
  }
  try {
    torch::save(backbone_, (dir / kBackboneFile).string());
    torch::save(head_, (dir / kHeadFile).string());
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("cannot write the weights to ", bundle_dir, ": ", e.what_without_backtrace()));
  }
  std::ofstream config_stream(dir / kConfigFile);
  config_stream << ModelConfigToJson(config_).dump(2) << "\n";
  if (!config_stream) {
    return absl::InternalError(absl::StrCat("cannot write ", (dir / kConfigFile).string()));
  }
  return absl::OkStatus();
}

absl::StatusOr<torch::Tensor> VideoModel::Embed(const torch::Tensor& frames,
                                                int64_t max_batch_frames) const {
  try {
    torch::InferenceMode inference;
    std::vector<torch::Tensor> chunks;
    for (const torch::Tensor& chunk : frames.split(max_batch_frames)) {
      chunks.push_back(backbone_->forward(chunk));
    }
    return torch::cat(chunks);
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("frame embedding failed: ", e.what_without_backtrace()));
  }
}

absl::StatusOr<torch::Tensor> VideoModel::Classify(const torch::Tensor& embeddings,
                                                   const torch::Tensor& lengths) const {
  try {
    torch::InferenceMode inference;
    return torch::softmax(head_->forward(embeddings, lengths), /*dim=*/-1);
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("classification head failed: ", e.what_without_backtrace()));
  }
}

std::string BlasLibraryInUse() {
  // LibTorch does not say which BLAS it ended up with; the dynamic loader's map does.
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const size_t path = line.find('/');
    if (path != std::string::npos && line.find("blas", path) != std::string::npos) {
      std::error_code error;
      const auto resolved = std::filesystem::canonical(line.substr(path), error);
      return error ? line.substr(path) : resolved.string();
    }
  }
  return "none loaded";
}

std::string ConfigureTorchThreads(int threads) {
  if (threads > 0) torch::set_num_threads(threads);
  return absl::StrCat("LibTorch ", TORCH_VERSION, ", intra-op threads ", torch::get_num_threads(),
                      ", BLAS ", BlasLibraryInUse());
}

}  // namespace vidclf::model
