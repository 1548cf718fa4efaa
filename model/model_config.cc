#include "model/model_config.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "model/attention/registry.h"

namespace vidclf::model {
namespace {

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("model.json: ", what));
}

// nlohmann's messages start with "[json.exception.type_error.302] "; users need only the rest.
absl::string_view WithoutExceptionId(absl::string_view message) {
  if (const size_t end = message.find("] ");
      !message.empty() && message[0] == '[' && end != absl::string_view::npos) {
    message.remove_prefix(end + 2);
  }
  return message;
}

// Reads one JSON object field by field. It keeps the first error, and remembers the keys it was
// asked for so that Finish can name a key the format does not have (a misspelling, usually).
class ObjectReader {
 public:
  // `path` is the object's place in the document ("" for the root, "head." for the head).
  ObjectReader(const nlohmann::json& json, std::string path, absl::Status* error)
      : json_(json), path_(std::move(path)), error_(error) {
    if (!json_.is_object()) {
      Fail(absl::StrCat(path_.empty() ? "the document" : path_.substr(0, path_.size() - 1),
                        " must be a JSON object"));
    }
  }

  template <typename T>
  void Read(const char* key, T* field, bool required = false) {
    const nlohmann::json* value = Find(key, required);
    if (value == nullptr) return;
    try {
      *field = value->get<T>();
    } catch (const nlohmann::json::exception& e) {
      Fail(absl::StrCat(path_, key, ": ", WithoutExceptionId(e.what())));
    }
  }

  // Reads a name and turns it into an enum with `parse`, whose error lists the known names.
  template <typename Enum>
  void ReadName(const char* key, Enum* field, absl::StatusOr<Enum> (*parse)(absl::string_view),
                bool required = false) {
    std::string name;
    if (!Has(key) && !required) {
      seen_.insert(key);
      return;
    }
    Read(key, &name, required);
    if (!error_->ok()) return;
    absl::StatusOr<Enum> parsed = parse(name);
    if (!parsed.ok()) return Fail(absl::StrCat(path_, key, ": ", parsed.status().message()));
    *field = *parsed;
  }

  // The object under `key`, or nullptr when it is absent (an error if `required`).
  const nlohmann::json* Object(const char* key, bool required = false) {
    return Find(key, required);
  }

  bool Has(const char* key) const { return json_.is_object() && json_.contains(key); }

  // Names the first key that no Read asked for.
  void Finish() {
    if (!error_->ok()) return;
    for (const auto& item : json_.items()) {
      if (seen_.count(item.key()) == 0) {
        return Fail(absl::StrCat("unknown key \"", path_, item.key(),
                                 "\"; known here: ", absl::StrJoin(seen_, ", ")));
      }
    }
  }

 private:
  const nlohmann::json* Find(const char* key, bool required) {
    seen_.insert(key);
    if (!error_->ok()) return nullptr;
    const auto it = json_.find(key);
    if (it == json_.end()) {
      if (required) Fail(absl::StrCat(path_, key, " is required"));
      return nullptr;
    }
    return &*it;
  }

  void Fail(absl::string_view what) {
    if (error_->ok()) *error_ = Invalid(what);
  }

  const nlohmann::json& json_;
  const std::string path_;
  absl::Status* error_;
  std::set<std::string> seen_;
};

// A registered mechanism's name, as it is.
absl::StatusOr<std::string> ParseAttentionName(absl::string_view name) {
  absl::StatusOr<const attention::AttentionSpec*> spec = attention::FindAttention(name);
  if (!spec.ok()) return spec.status();
  return (*spec)->name;
}

attention::AttentionOptions AttentionOptionsFromJson(const nlohmann::json& json,
                                                     absl::Status* error) {
  attention::AttentionOptions options;
  ObjectReader reader(json, "head.attention.", error);
  reader.ReadName("type", &options.type, &ParseAttentionName);
  reader.Read("scale", &options.scale);
  reader.Read("max_length", &options.max_length);
  reader.Read("causal", &options.causal);
  reader.Read("epsilon", &options.epsilon);
  reader.Read("seed", &options.seed);
  // Any registered mechanism's parameters: those of substitutions live here too.
  for (const attention::AttentionParameter& parameter : attention::AttentionParameters()) {
    const bool present = reader.Has(parameter.key);
    int64_t value = parameter.default_value;
    reader.Read(parameter.key, &value);
    if (present) options.parameters[parameter.key] = value;
  }
  reader.Finish();
  return options;
}

nlohmann::json AttentionOptionsToJson(const attention::AttentionOptions& options) {
  nlohmann::json json = {
      {"type", options.type},     {"scale", options.scale},     {"max_length", options.max_length},
      {"causal", options.causal}, {"epsilon", options.epsilon}, {"seed", options.seed}};
  for (const auto& [key, value] : options.parameters) json[key] = value;
  return json;
}

void ReadHead(const nlohmann::json& json, ModelConfig* config, absl::Status* error) {
  ObjectReader reader(json, "head.", error);
  reader.ReadName("type", &config->head, &ParseHeadType, /*required=*/true);
  if (!error->ok()) return;
  reader.Read("frame_differences", &config->frame_differences);
  if (config->head == HeadType::kGru) {
    GruHeadConfig& g = config->gru;
    reader.Read("hidden_size", &g.hidden_size);
    reader.Read("num_layers", &g.num_layers);
    reader.Read("mlp_hidden_size", &g.mlp_hidden_size);
    reader.Read("input_dropout", &g.input_dropout);
  } else if (config->head == HeadType::kTransformer) {
    TransformerHeadConfig& t = config->transformer;
    reader.Read("d_model", &t.d_model);
    reader.Read("num_heads", &t.num_heads);
    reader.Read("num_layers", &t.num_layers);
    reader.Read("ffn_size", &t.ffn_size);
    reader.Read("pre_norm", &t.pre_norm);
    reader.ReadName("pooling", &t.pooling, &ParsePooling);
    reader.Read("positional_encoding", &t.positional_encoding);
    reader.Read("dropout", &t.dropout);
    if (const nlohmann::json* attention = reader.Object("attention")) {
      t.attention = AttentionOptionsFromJson(*attention, error);
    }
    reader.Read("attention_substitutions", &t.attention_substitutions);
  }
  reader.Finish();
}

// A path component: REPO/<name>/<version>/ must stay inside the repository.
bool IsPathComponent(const std::string& part) {
  return !part.empty() && part != "." && part != ".." &&
         part.find_first_of("/\\") == std::string::npos;
}

absl::Status ValidateTransformer(const ModelConfig& config) {
  const TransformerHeadConfig& t = config.transformer;
  if (t.d_model < 2 || t.d_model % 2 != 0) {
    return Invalid(absl::StrCat("head.d_model must be even and positive; got ", t.d_model));
  }
  if (t.num_heads < 1 || t.d_model % t.num_heads != 0) {
    return Invalid(absl::StrCat("head.num_heads must divide head.d_model (", t.d_model, "); got ",
                                t.num_heads));
  }
  if (t.num_layers < 1 || t.ffn_size < 1) {
    return Invalid("head.num_layers and head.ffn_size must be positive");
  }
  if (t.dropout < 0 || t.dropout >= 1) {
    return Invalid(absl::StrCat("head.dropout must be in [0, 1); got ", t.dropout));
  }
  absl::StatusOr<const attention::AttentionSpec*> spec = attention::FindAttention(t.attention.type);
  if (!spec.ok()) return Invalid(absl::StrCat("head.attention.type: ", spec.status().message()));
  if (attention::IsCausal(**spec, t.attention) && t.pooling == Pooling::kCls) {
    return Invalid(absl::StrCat("head.pooling \"cls\" cannot be used with causal attention (",
                                t.attention.type,
                                "): a class token placed first would see no frame; use \"mean\""));
  }
  for (const std::string& name : t.attention_substitutions) {
    absl::StatusOr<const attention::AttentionSpec*> substitute = attention::FindAttention(name);
    if (!substitute.ok()) {
      return Invalid(absl::StrCat("head.attention_substitutions: ", substitute.status().message()));
    }
    if (!(*substitute)->substitutable) {
      return Invalid(absl::StrCat(
          "head.attention_substitutions: ", name,
          " cannot be an attention substitution: it has learned weights of its own that a model "
          "trained with another mechanism does not have"));
    }
  }
  // Each mechanism checks its own options (clusters, landmarks, …) when it is built.
  std::vector<std::string> types = t.attention_substitutions;
  types.push_back(t.attention.type);
  for (const std::string& type : types) {
    attention::AttentionOptions options = t.attention;
    options.type = type;
    options.num_heads = t.num_heads;
    options.head_dim = t.d_model / t.num_heads;
    options.value_dim = options.head_dim;
    if (auto mechanism = attention::MakeAttention(options); !mechanism.ok()) {
      return Invalid(absl::StrCat("head.attention: ", mechanism.status().message()));
    }
  }
  // The sliding window (plus a class token) must fit a mechanism bounded by max_length, such as
  // Linformer with its fixed projections.
  const int64_t window_tokens =
      config.streaming.window_frames + (t.pooling == Pooling::kCls ? 1 : 0);
  if ((*spec)->bounded_by_max_length && window_tokens > t.attention.max_length) {
    return Invalid(absl::StrCat("streaming.window_frames (", config.streaming.window_frames,
                                ") does not fit ", t.attention.type, "'s max_length ",
                                t.attention.max_length));
  }
  return absl::OkStatus();
}

}  // namespace

std::string HeadTypeName(HeadType head) {
  switch (head) {
    case HeadType::kGru:
      return "gru";
    case HeadType::kTransformer:
      return "transformer";
    case HeadType::kBagOfFrames:
      return "bag_of_frames";
  }
  return "?";
}

absl::StatusOr<HeadType> ParseHeadType(absl::string_view name) {
  for (const HeadType head : {HeadType::kGru, HeadType::kTransformer, HeadType::kBagOfFrames}) {
    if (name == HeadTypeName(head)) return head;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown head type \"", name, "\"; known: gru, transformer, bag_of_frames"));
}

absl::Status ValidateModelConfig(const ModelConfig& config) {
  if (!IsPathComponent(config.name) || !IsPathComponent(config.version)) {
    return Invalid(absl::StrCat("name and version must be non-empty and free of slashes; got \"",
                                config.name, "\" and \"", config.version, "\""));
  }
  if (config.labels.empty()) return Invalid("labels must list at least one class");
  std::set<std::string> unique_labels;
  for (const std::string& label : config.labels) {
    if (label.empty()) return Invalid("labels: a label is empty");
    if (!unique_labels.insert(label).second) {
      return Invalid(absl::StrCat("labels: \"", label, "\" appears twice"));
    }
  }
  const InputConfig& input = config.input;
  if (input.num_frames < 1) return Invalid("input.num_frames must be at least 1");
  if (input.crop_size < 32 || input.resize_shorter_side < input.crop_size) {
    return Invalid("input needs 32 <= crop_size <= resize_shorter_side");
  }
  if (std::any_of(input.std.begin(), input.std.end(), [](float s) { return !(s > 0); })) {
    return Invalid("input.std must be positive");
  }
  if (config.backbone != "resnet18") {
    return Invalid(absl::StrCat("unknown backbone \"", config.backbone, "\"; known: resnet18"));
  }
  if (config.streaming.window_frames < 1 || config.streaming.stride_frames < 1 ||
      config.streaming.stride_frames > config.streaming.window_frames) {
    return Invalid("streaming needs 1 <= stride_frames <= window_frames");
  }
  if (config.segmentation.has_value() &&
      !(config.segmentation->frames_per_second > 0 &&
        config.segmentation->frames_per_second <= kMaxSegmentationFramesPerSecond)) {
    return Invalid(absl::StrCat(
        "segmentation.frames_per_second must be in (0, ", kMaxSegmentationFramesPerSecond,
        "], a rate the server samples at; got ", config.segmentation->frames_per_second));
  }
  if (config.head == HeadType::kBagOfFrames) return absl::OkStatus();
  if (config.head == HeadType::kGru) {
    if (config.gru.hidden_size < 1 || config.gru.num_layers < 1 || config.gru.mlp_hidden_size < 1) {
      return Invalid("head: hidden_size, num_layers and mlp_hidden_size must be positive");
    }
    if (!(config.gru.input_dropout >= 0 && config.gru.input_dropout < 1)) {
      return Invalid(
          absl::StrCat("head.input_dropout must be in [0, 1); got ", config.gru.input_dropout));
    }
    return absl::OkStatus();
  }
  return ValidateTransformer(config);
}

absl::StatusOr<ModelConfig> ModelConfigFromJson(const nlohmann::json& json) {
  ModelConfig config;
  absl::Status error;
  ObjectReader root(json, "", &error);
  root.Read("name", &config.name, /*required=*/true);
  root.Read("version", &config.version, /*required=*/true);
  root.Read("labels", &config.labels, /*required=*/true);
  if (const nlohmann::json* input = root.Object("input", /*required=*/true)) {
    ObjectReader reader(*input, "input.", &error);
    reader.Read("num_frames", &config.input.num_frames);
    reader.Read("resize_shorter_side", &config.input.resize_shorter_side);
    reader.Read("crop_size", &config.input.crop_size);
    reader.Read("mean", &config.input.mean);
    reader.Read("std", &config.input.std);
    reader.Finish();
  }
  root.Read("backbone", &config.backbone);
  if (const nlohmann::json* head = root.Object("head", /*required=*/true)) {
    ReadHead(*head, &config, &error);
  }
  if (const nlohmann::json* streaming = root.Object("streaming")) {
    ObjectReader reader(*streaming, "streaming.", &error);
    reader.Read("window_frames", &config.streaming.window_frames);
    reader.Read("stride_frames", &config.streaming.stride_frames);
    reader.Finish();
  }
  if (const nlohmann::json* segmentation = root.Object("segmentation")) {
    ObjectReader reader(*segmentation, "segmentation.", &error);
    reader.Read("frames_per_second", &config.segmentation.emplace().frames_per_second,
                /*required=*/true);
    reader.Finish();
  }
  root.Read("metrics", &config.metrics);
  root.Read("provenance", &config.provenance);
  root.Finish();
  if (!error.ok()) return error;
  if (auto status = ValidateModelConfig(config); !status.ok()) return status;
  return config;
}

nlohmann::json ModelConfigToJson(const ModelConfig& config) {
  nlohmann::json head = {{"type", HeadTypeName(config.head)}};
  if (config.head == HeadType::kGru) {
    head["hidden_size"] = config.gru.hidden_size;
    head["num_layers"] = config.gru.num_layers;
    head["mlp_hidden_size"] = config.gru.mlp_hidden_size;
    head["input_dropout"] = config.gru.input_dropout;
  } else if (config.head == HeadType::kTransformer) {
    const TransformerHeadConfig& t = config.transformer;
    head["d_model"] = t.d_model;
    head["num_heads"] = t.num_heads;
    head["num_layers"] = t.num_layers;
    head["ffn_size"] = t.ffn_size;
    head["pre_norm"] = t.pre_norm;
    head["pooling"] = PoolingName(t.pooling);
    head["positional_encoding"] = t.positional_encoding;
    head["dropout"] = t.dropout;
    head["attention"] = AttentionOptionsToJson(t.attention);
    head["attention_substitutions"] = t.attention_substitutions;
  }
  // Written only when set, so that a bundle that does not use them reads as it did before.
  if (config.frame_differences) head["frame_differences"] = true;
  nlohmann::json json = {
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
      {"metrics", config.metrics},
      {"provenance", config.provenance},
  };
  if (config.segmentation.has_value()) {
    json["segmentation"] = {{"frames_per_second", config.segmentation->frames_per_second}};
  }
  return json;
}

}  // namespace vidclf::model
