#include "model/model_config.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace vidclf::model {
namespace {

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("model.json: ", what));
}

}  // namespace

absl::StatusOr<ModelConfig> ModelConfigFromJson(const nlohmann::json& json) {
  ModelConfig config;
  try {
    config.name = json.at("name").get<std::string>();
    config.version = json.at("version").get<std::string>();
    config.labels = json.at("labels").get<std::vector<std::string>>();
    const nlohmann::json& input = json.at("input");
    config.input.num_frames = input.value("num_frames", config.input.num_frames);
    config.input.resize_shorter_side =
        input.value("resize_shorter_side", config.input.resize_shorter_side);
    config.input.crop_size = input.value("crop_size", config.input.crop_size);
    config.input.mean = input.value("mean", config.input.mean);
    config.input.std = input.value("std", config.input.std);
    config.backbone = json.value("backbone", config.backbone);
    const nlohmann::json& head = json.at("head");
    config.head = head.at("type").get<std::string>();
    config.gru.hidden_size = head.value("hidden_size", config.gru.hidden_size);
    config.gru.num_layers = head.value("num_layers", config.gru.num_layers);
    config.gru.mlp_hidden_size = head.value("mlp_hidden_size", config.gru.mlp_hidden_size);
    config.provenance = json.value("provenance", nlohmann::json::object());
  } catch (const nlohmann::json::exception& e) {
    return Invalid(e.what());
  }
  if (config.name.empty() || config.version.empty()) return Invalid("name and version are needed");
  if (config.labels.empty()) return Invalid("labels must list at least one class");
  if (config.input.num_frames < 1) return Invalid("input.num_frames must be at least 1");
  if (config.input.crop_size < 32 || config.input.resize_shorter_side < config.input.crop_size) {
    return Invalid("input needs 32 <= crop_size <= resize_shorter_side");
  }
  if (config.backbone != "resnet18") {
    return Invalid(absl::StrCat("unknown backbone \"", config.backbone, "\"; known: resnet18"));
  }
  if (config.head != "gru") {
    return Invalid(absl::StrCat("unknown head type \"", config.head, "\"; known: gru"));
  }
  if (config.gru.hidden_size < 1 || config.gru.num_layers < 1 || config.gru.mlp_hidden_size < 1) {
    return Invalid("head sizes must be positive");
  }
  return config;
}

nlohmann::json ModelConfigToJson(const ModelConfig& config) {
  return {
      {"name", config.name},
      {"version", config.version},
      {"labels", config.labels},
      {"input",
       {{"num_frames", config.input.num_frames},
        {"resize_shorter_side", config.input.resize_shorter_side},
        {"crop_size", config.input.crop_size},
        {"mean", config.input.mean},
        {"std", config.input.std}}},
      {"backbone", config.backbone},
      {"head",
       {{"type", config.head},
        {"hidden_size", config.gru.hidden_size},
        {"num_layers", config.gru.num_layers},
        {"mlp_hidden_size", config.gru.mlp_hidden_size}}},
      {"provenance", config.provenance},
  };
}

}  // namespace vidclf::model
