// The description of a model bundle, stored as model.json beside its weights:
//
//   REPO/<name>/<version>/model.json     this config
//   REPO/<name>/<version>/backbone.pt    ResNet18 weights (torchvision names)
//   REPO/<name>/<version>/head.pt        temporal head weights
//   REPO/<name>/<version>/backbone_int8.json   optional: the int8 calibration (int8_calibration.h)
#ifndef VIDCLF_MODEL_MODEL_CONFIG_H_
#define VIDCLF_MODEL_MODEL_CONFIG_H_

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/attention/attention.h"
#include "model/heads/head_stream.h"
#include "model/heads/transformer_head.h"

namespace vidclf::model {

enum class HeadType {
  kGru,
  kTransformer,
  kBagOfFrames,  // order-blind baseline (heads/bag_of_frames_head.h); has no options
};

// "gru", "transformer" or "bag_of_frames".
std::string HeadTypeName(HeadType head);
// INVALID_ARGUMENT for any other name.
absl::StatusOr<HeadType> ParseHeadType(absl::string_view name);

// How frames are read and prepared before the backbone sees them.
struct InputConfig {
  // Frames sampled uniformly over the video.
  int num_frames = 16;
  // Shorter side resize, then centre crop to a square of crop_size.
  int resize_shorter_side = 256;
  int crop_size = 224;
  // Per-channel RGB normalisation (ImageNet's by default).
  std::array<float, 3> mean = {0.485f, 0.456f, 0.406f};
  std::array<float, 3> std = {0.229f, 0.224f, 0.225f};
};

struct GruHeadConfig {
  int64_t hidden_size = 32;
  int64_t num_layers = 2;
  int64_t mlp_hidden_size = 16;
  // Training only: dropout on the head's input embeddings.
  double input_dropout = 0.0;
};

struct TransformerHeadConfig {
  int64_t d_model = 512;
  int64_t num_heads = 8;
  int64_t num_layers = 6;
  int64_t ffn_size = 1024;
  bool pre_norm = false;
  Pooling pooling = Pooling::kMean;
  // False drops the sinusoidal positions (a baseline that sees frames as a set).
  bool positional_encoding = true;
  double dropout = 0.1;
  // type and per-mechanism options; head_dim, value_dim and num_heads follow from the above.
  attention::AttentionOptions attention;
  // Mechanisms a caller may ask to run instead of attention.type with the same weights, e.g.
  // clustered or improved-clustered for a softmax-trained model (the clustered-attention thesis
  // evaluates exactly this). Only mechanisms without learned weights of their own qualify.
  std::vector<std::string> attention_substitutions;
};

// A segmentation model's head answers per frame (TemporalHead::forward_frames): it was trained
// on every frame sampled at frames_per_second, each labelled with what happens then.
struct SegmentationConfig {
  double frames_per_second = 4;
};

// The highest rate a segmentation model may be trained and served at, as ClassifySegments's own
// limit on frames_per_second.
constexpr double kMaxSegmentationFramesPerSecond = 1000;

struct ModelConfig {
  std::string name;
  std::string version;
  std::vector<std::string> labels;
  InputConfig input;
  // Only "resnet18" for now.
  std::string backbone = "resnet18";
  // Only the matching block below is used (and written).
  HeadType head = HeadType::kGru;
  GruHeadConfig gru;
  TransformerHeadConfig transformer;
  // Any head: it sees each frame's change from the one before (TemporalHead::frame_differences).
  bool frame_differences = false;
  // How heads without a recurrent step follow a live stream (heads/head_stream.h).
  SlidingWindowOptions streaming;
  // Set for a segmentation model; a classification model (one answer per clip) has none.
  std::optional<SegmentationConfig> segmentation;
  // Held-out metrics of the weights (vidclf-train writes its evaluation); free-form, shown to
  // users.
  nlohmann::json metrics = nlohmann::json::object();
  // Free-form record of how the weights were made (data set, seed, code version); shown to users.
  nlohmann::json provenance = nlohmann::json::object();
};

// The one check of a configuration, used when model.json is read, before it is written and by
// VideoModel::Create. INVALID_ARGUMENT naming the field (as its model.json path) and the problem.
absl::Status ValidateModelConfig(const ModelConfig& config);

// Reads and validates a model.json document. Strict: a key the format does not have, a value of
// the wrong type or an unknown name is INVALID_ARGUMENT naming it ("head.hiden_size").
absl::StatusOr<ModelConfig> ModelConfigFromJson(const nlohmann::json& json);
nlohmann::json ModelConfigToJson(const ModelConfig& config);

}  // namespace vidclf::model

#endif  // VIDCLF_MODEL_MODEL_CONFIG_H_
