#include "model/int8_calibration.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/json_text.h"
#include "model/folded_resnet18.h"

namespace vidclf::model {
namespace {

// Runs `folded` in float32, as the fused backbones do, noting the largest magnitude of its input
// (tensor 0) and of every convolution's stored output (tensor 1 + its index in the folded order),
// and summing each convolution's input channel by channel.
// The largest, not a percentile: on the default models a 99.999th percentile gave the same
// agreement with fp32 (1,339 against 1,338 of 1,350 test clips the same top class), and on a
// random network three times the embeddings' error.
class RangeRecorder {
 public:
  explicit RangeRecorder(const FoldedResNet18& folded) {
    auto add = [&](const FoldedConvolution& conv) {
      FoldedConvolution copy = conv;
      copy.weight = conv.weight.to(torch::kFloat);
      copy.bias = conv.bias.to(torch::kFloat);
      convolutions_.push_back(std::move(copy));
    };
    add(folded.stem);
    for (const FoldedBlock& block : folded.blocks) {
      add(block.conv1);
      add(block.conv2);
      if (block.downsample) add(*block.downsample);
      has_downsample_.push_back(block.downsample.has_value());
    }
    largest_.assign(1 + convolutions_.size(), 0.0f);
    input_sums_.resize(convolutions_.size());
  }

  void Run(const torch::Tensor& frames) {
    Note(0, frames);
    frames_ += frames.size(0);
    torch::Tensor x = Convolve(0, frames).relu_();
    Note(1, x);
    x = at::max_pool2d(x, {3, 3}, {2, 2}, {1, 1});
    size_t index = 1;
    for (bool downsample : has_downsample_) {
      const size_t conv1 = index, conv2 = index + 1;
      index += downsample ? 3 : 2;
      torch::Tensor residual = x;
      if (downsample) {
        residual = Convolve(conv2 + 1, x);
        Note(conv2 + 2, residual);
      }
      torch::Tensor inner = Convolve(conv1, x).relu_();
      Note(conv1 + 1, inner);
      x = Convolve(conv2, inner).add_(residual).relu_();
      Note(conv2 + 1, x);
    }
  }

  // The largest magnitudes noted: of the input, then of each convolution's output.
  const std::vector<float>& largest() const { return largest_; }

  // The mean of each convolution's input channels over every frame and position run.
  std::vector<std::vector<float>> InputMeans() const {
    std::vector<std::vector<float>> means;
    for (const torch::Tensor& sum : input_sums_) {
      const torch::Tensor mean = (sum / frames_).to(torch::kFloat).contiguous();
      means.emplace_back(mean.data_ptr<float>(), mean.data_ptr<float>() + mean.numel());
    }
    return means;
  }

 private:
  torch::Tensor Convolve(size_t index, const torch::Tensor& x) {
    // Each frame's mean over positions, summed over the frames, in float64: hundreds of frames.
    const torch::Tensor sum = x.to(torch::kDouble).mean({2, 3}).sum(0);
    input_sums_[index] = input_sums_[index].defined() ? input_sums_[index] + sum : sum;
    const FoldedConvolution& conv = convolutions_[index];
    return at::conv2d(x, conv.weight, conv.bias, {conv.stride, conv.stride},
                      {conv.padding, conv.padding});
  }
  void Note(size_t index, const torch::Tensor& values) {
    largest_[index] = std::max(largest_[index], values.abs().max().item<float>());
  }

  std::vector<FoldedConvolution> convolutions_;
  std::vector<bool> has_downsample_;
  std::vector<float> largest_;
  std::vector<torch::Tensor> input_sums_;
  int64_t frames_ = 0;
};

}  // namespace

absl::StatusOr<Int8Calibration> CalibrateInt8(const ResNet18& resnet,
                                              const std::vector<torch::Tensor>& frames) {
  Int8Calibration calibration;
  for (const torch::Tensor& batch : frames) {
    if (batch.dim() != 4 || batch.size(1) != 3 || batch.size(2) != batch.size(3) ||
        (calibration.crop_size != 0 && batch.size(2) != calibration.crop_size)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "calibration frames must be [N, 3, S, S] of one side S; got ", batch.size(2), "x",
          batch.size(3), " after ", calibration.crop_size, "x", calibration.crop_size));
    }
    calibration.crop_size = batch.size(2);
    calibration.frames += batch.size(0);
  }
  if (calibration.frames == 0) return absl::InvalidArgumentError("no frames to calibrate on");
  torch::InferenceMode inference;
  RangeRecorder recorder(FoldBatchNorms(resnet));
  for (const torch::Tensor& batch : frames) {
    recorder.Run(batch.to(torch::kCPU, torch::kFloat).contiguous());
  }
  calibration.input_max = recorder.largest().front();
  calibration.output_max.assign(recorder.largest().begin() + 1, recorder.largest().end());
  calibration.input_mean = recorder.InputMeans();
  return calibration;
}

nlohmann::json Int8CalibrationToJson(const Int8Calibration& calibration) {
  return {{"frames", calibration.frames},
          {"crop_size", calibration.crop_size},
          {"input_max", calibration.input_max},
          {"output_max", calibration.output_max},
          {"input_mean", calibration.input_mean}};
}

absl::StatusOr<Int8Calibration> Int8CalibrationFromJson(const nlohmann::json& json) {
  Int8Calibration calibration;
  auto positive = [](double value) { return value > 0 && std::isfinite(value); };
  if (!json.is_object() || !json.contains("frames") || !json["frames"].is_number_integer() ||
      json["frames"].get<int64_t>() <= 0) {
    return absl::InvalidArgumentError("frames: a positive integer is required");
  }
  calibration.frames = json["frames"].get<int64_t>();
  if (!json.contains("crop_size") || !json["crop_size"].is_number_integer() ||
      json["crop_size"].get<int64_t>() <= 0) {
    return absl::InvalidArgumentError("crop_size: a positive integer is required");
  }
  calibration.crop_size = json["crop_size"].get<int64_t>();
  if (!json.contains("input_max") || !json["input_max"].is_number() ||
      !positive(json["input_max"].get<double>())) {
    return absl::InvalidArgumentError("input_max: a positive number is required");
  }
  calibration.input_max = json["input_max"].get<float>();
  if (!json.contains("output_max") || !json["output_max"].is_array()) {
    return absl::InvalidArgumentError("output_max: an array of positive numbers is required");
  }
  for (const nlohmann::json& value : json["output_max"]) {
    if (!value.is_number() || !positive(value.get<double>())) {
      return absl::InvalidArgumentError("output_max: an array of positive numbers is required");
    }
    calibration.output_max.push_back(value.get<float>());
  }
  if (!json.contains("input_mean")) return calibration;
  const std::string input_mean_error =
      "input_mean: an array of arrays of finite numbers is required";
  if (!json["input_mean"].is_array()) return absl::InvalidArgumentError(input_mean_error);
  for (const nlohmann::json& channels : json["input_mean"]) {
    if (!channels.is_array()) return absl::InvalidArgumentError(input_mean_error);
    std::vector<float>& means = calibration.input_mean.emplace_back();
    for (const nlohmann::json& value : channels) {
      if (!value.is_number() || !std::isfinite(value.get<double>())) {
        return absl::InvalidArgumentError(input_mean_error);
      }
      means.push_back(value.get<float>());
    }
  }
  return calibration;
}

absl::Status WriteInt8Calibration(const Int8Calibration& calibration, const std::string& dir) {
  const std::filesystem::path path = std::filesystem::path(dir) / kInt8CalibrationFile;
  std::ofstream out(path);
  out << JsonText(Int8CalibrationToJson(calibration), 2) << "\n";
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path.string()));
  return absl::OkStatus();
}

absl::StatusOr<Int8Calibration> ReadInt8Calibration(const std::string& dir) {
  const std::filesystem::path path = std::filesystem::path(dir) / kInt8CalibrationFile;
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("no ", kInt8CalibrationFile, " in ", dir));
  const nlohmann::json json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), " is not valid JSON"));
  }
  absl::StatusOr<Int8Calibration> calibration = Int8CalibrationFromJson(json);
  if (!calibration.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path.string(), ": ", calibration.status().message()));
  }
  return calibration;
}

}  // namespace vidclf::model
