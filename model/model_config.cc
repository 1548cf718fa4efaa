#include "model/model_config.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/attention/registry.h"

namespace vidclf::model {
namespace {

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("model.json: ", what));
}

// Reads the fields `json` has and keeps the defaults of the others.
attention::AttentionOptions AttentionOptionsFromJson(const nlohmann::json& json) {
  attention::AttentionOptions options;
  options.type = json.value("type", options.type);
  options.scale = json.value("scale", options.scale);
  options.max_length = json.value("max_length", options.max_length);
  options.causal = json.value("causal", options.causal);
  options.epsilon = json.value("epsilon", options.epsilon);
  options.linformer_k = json.value("linformer_k", options.linformer_k);
  options.nystrom_landmarks = json.value("nystrom_landmarks", options.nystrom_landmarks);
  options.nystrom_pinv_iterations =
      json.value("nystrom_pinv_iterations", options.nystrom_pinv_iterations);
  options.clusters = json.value("clusters", options.clusters);
  options.hash_bits = json.value("hash_bits", options.hash_bits);
  options.lloyd_iterations = json.value("lloyd_iterations", options.lloyd_iterations);
  options.topk = json.value("topk", options.topk);
  options.seed = json.value("seed", options.seed);
  return options;
}

nlohmann::json AttentionOptionsToJson(const attention::AttentionOptions& options) {
  return {{"type", options.type},
          {"scale", options.scale},
          {"max_length", options.max_length},
          {"causal", options.causal},
          {"epsilon", options.epsilon},
          {"linformer_k", options.linformer_k},
          {"nystrom_landmarks", options.nystrom_landmarks},
          {"nystrom_pinv_iterations", options.nystrom_pinv_iterations},
          {"clusters", options.clusters},
          {"hash_bits", options.hash_bits},
          {"lloyd_iterations", options.lloyd_iterations},
          {"topk", options.topk},
          {"seed", options.seed}};
}

absl::Status ValidateTransformer(const ModelConfig& config) {
  const TransformerHeadConfig& t = config.transformer;
  const std::vector<std::string> known = attention::AttentionTypes();
  for (const std::string& type : t.attention_substitutions) {
    if (std::find(known.begin(), known.end(), type) == known.end()) {
      return Invalid(absl::StrCat("unknown attention substitution \"", type,
                                  "\"; known: ", absl::StrJoin(known, ", ")));
    }
    if (type == "linformer") {
      return Invalid(
          "linformer cannot be an attention substitution: its projections E and F are learned "
          "weights that a model trained with another mechanism does not have");
    }
  }
  // The sliding window (plus a class token) must fit Linformer's fixed projections.
  const int64_t window_tokens = config.streaming.window_frames + (t.pooling == "cls" ? 1 : 0);
  if (t.attention.type == "linformer" && window_tokens > t.attention.max_length) {
    return Invalid(absl::StrCat("streaming.window_frames (", config.streaming.window_frames,
                                ") does not fit linformer's max_length ", t.attention.max_length));
  }
  return absl::OkStatus();
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
    if (config.head == "gru") {
      config.gru.hidden_size = head.value("hidden_size", config.gru.hidden_size);
      config.gru.num_layers = head.value("num_layers", config.gru.num_layers);
      config.gru.mlp_hidden_size = head.value("mlp_hidden_size", config.gru.mlp_hidden_size);
    } else if (config.head == "transformer") {
      TransformerHeadConfig& t = config.transformer;
      t.d_model = head.value("d_model", t.d_model);
      t.num_heads = head.value("num_heads", t.num_heads);
      t.num_layers = head.value("num_layers", t.num_layers);
      t.ffn_size = head.value("ffn_size", t.ffn_size);
      t.pre_norm = head.value("pre_norm", t.pre_norm);
      t.pooling = head.value("pooling", t.pooling);
      t.dropout = head.value("dropout", t.dropout);
      t.attention = AttentionOptionsFromJson(head.value("attention", nlohmann::json::object()));
      t.attention_substitutions = head.value("attention_substitutions", t.attention_substitutions);
    }
    const nlohmann::json streaming = json.value("streaming", nlohmann::json::object());
    config.streaming.window_frames =
        streaming.value("window_frames", config.streaming.window_frames);
    config.streaming.stride_frames =
        streaming.value("stride_frames", config.streaming.stride_frames);
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
  if (config.head != "gru" && config.head != "transformer") {
    return Invalid(
        absl::StrCat("unknown head type \"", config.head, "\"; known: gru, transformer"));
  }
  if (config.gru.hidden_size < 1 || config.gru.num_layers < 1 || config.gru.mlp_hidden_size < 1) {
    return Invalid("head sizes must be positive");
  }
  if (config.streaming.window_frames < 1 || config.streaming.stride_frames < 1 ||
      config.streaming.stride_frames > config.streaming.window_frames) {
    return Invalid("streaming needs 1 <= stride_frames <= window_frames");
  }
  if (config.head == "transformer") {
    if (auto status = ValidateTransformer(config); !status.ok()) return status;
  }
  return config;
}

nlohmann::json ModelConfigToJson(const ModelConfig& config) {
  nlohmann::json head = {{"type", config.head}};
  if (config.head == "gru") {
    head["hidden_size"] = config.gru.hidden_size;
    head["num_layers"] = config.gru.num_layers;
    head["mlp_hidden_size"] = config.gru.mlp_hidden_size;
  } else {
    const TransformerHeadConfig& t = config.transformer;
    head["d_model"] = t.d_model;
    head["num_heads"] = t.num_heads;
    head["num_layers"] = t.num_layers;
    head["ffn_size"] = t.ffn_size;
    head["pre_norm"] = t.pre_norm;
    head["pooling"] = t.pooling;
    head["dropout"] = t.dropout;
    head["attention"] = AttentionOptionsToJson(t.attention);
    head["attention_substitutions"] = t.attention_substitutions;
  }
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
      {"head", head},
      {"streaming",
       {{"window_frames", config.streaming.window_frames},
        {"stride_frames", config.streaming.stride_frames}}},
      {"provenance", config.provenance},
  };
}

}  // namespace vidclf::model
