// What an int8 backbone needs besides its weights: the range of the frames it reads and of every
// convolution's output, and the mean of every convolution's input channels, measured in float32
// on frames of the model's own training data. Weights are quantized per output channel from their
// own range at load; activations per tensor, each from its calibrated largest magnitude
// (symmetric, no zero point). A bundle keeps its calibration in backbone_int8.json beside the
// weights (vidclf-train calibrate writes it).
#ifndef VIDCLF_MODEL_INT8_CALIBRATION_H_
#define VIDCLF_MODEL_INT8_CALIBRATION_H_

#include <torch/torch.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/resnet18.h"

namespace vidclf::model {

inline constexpr char kInt8CalibrationFile[] = "backbone_int8.json";

struct Int8Calibration {
  int64_t frames = 0;     // how many frames measured it
  int64_t crop_size = 0;  // their side
  float input_max = 0;    // the largest magnitude of a frame's value
  // The largest value of each convolution's output as the backbone stores it (after its ReLU,
  // and for a block's second convolution after the residual sum too), in the order the folded
  // network lists them: the stem, then each block's conv1, conv2 and downsample.
  std::vector<float> output_max;
  // The mean of each convolution's input, channel by channel over the frames and positions, in
  // the same order. The int8 backbone subtracts from each output channel's bias the mean shift
  // that rounding its weights causes on such inputs ("bias correction", Nagel et al., 2019): on
  // the default models it halved the embeddings' median error (docs/backbone-benchmark.md).
  // Optional in the file: without it the biases are left as they are.
  std::vector<std::vector<float>> input_mean;
};

// Measures `resnet` (eval mode's batch norms, float32 on the CPU) on `frames`, batches of
// [N, 3, S, S] preprocessed as the model's input. INVALID_ARGUMENT for no frames or frames of
// different sides.
absl::StatusOr<Int8Calibration> CalibrateInt8(const ResNet18& resnet,
                                              const std::vector<torch::Tensor>& frames);

nlohmann::json Int8CalibrationToJson(const Int8Calibration& calibration);
// INVALID_ARGUMENT naming the field that is missing, of the wrong type or out of range.
absl::StatusOr<Int8Calibration> Int8CalibrationFromJson(const nlohmann::json& json);

// DIR/backbone_int8.json. Reading: NOT_FOUND where the bundle has none.
absl::Status WriteInt8Calibration(const Int8Calibration& calibration, const std::string& dir);
absl::StatusOr<Int8Calibration> ReadInt8Calibration(const std::string& dir);

}  // namespace vidclf::model

#endif  // VIDCLF_MODEL_INT8_CALIBRATION_H_
