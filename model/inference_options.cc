#include "model/inference_options.h"

#include <torch/version.h>

#include <array>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/onednn_resnet18.h"

namespace vidclf::model {
namespace {

template <typename Enum, size_t N>
using NameTable = std::array<std::pair<Enum, const char*>, N>;

constexpr NameTable<Precision, 5> kPrecisions = {{{Precision::kFp32, "fp32"},
                                                  {Precision::kFp16, "fp16"},
                                                  {Precision::kBf16, "bf16"},
                                                  {Precision::kInt8, "int8"},
                                                  {Precision::kAuto, "auto"}}};
constexpr NameTable<BackboneKernels, 3> kBackboneKernels = {
    {{BackboneKernels::kEager, "eager"},
     {BackboneKernels::kFused, "fused"},
     {BackboneKernels::kWinograd, "winograd"}}};
constexpr NameTable<StepWeights, 2> kStepWeights = {
    {{StepWeights::kFloat32, "float32"}, {StepWeights::kInt8, "int8"}}};

template <typename Enum, size_t N>
std::string NameOf(const NameTable<Enum, N>& table, Enum value) {
  for (const auto& [known, name] : table) {
    if (known == value) return name;
  }
  return absl::StrCat(static_cast<int>(value));
}

template <typename Enum, size_t N>
absl::StatusOr<Enum> Parse(const NameTable<Enum, N>& table, const char* what,
                           absl::string_view name) {
  for (const auto& [value, known] : table) {
    if (name == known) return value;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown ", what, " \"", name, "\"; use ",
                   absl::StrJoin(table, ", ", [](std::string* out, const auto& entry) {
                     absl::StrAppend(out, entry.second);
                   })));
}

absl::StatusOr<torch::Device> UsableCudaDevice(int index, absl::string_view asked) {
  if (!torch::cuda::is_available()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "device ", asked, " was asked for, but this process sees no CUDA GPU (LibTorch ",
        TORCH_VERSION, ", CUDA GPUs visible: ", torch::cuda::device_count(), ")"));
  }
  if (index >= static_cast<int>(torch::cuda::device_count())) {
    return absl::FailedPreconditionError(absl::StrCat("device ", asked, " does not exist; ",
                                                      torch::cuda::device_count(),
                                                      " CUDA GPUs are visible"));
  }
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
}

}  // namespace

InferenceOptions InferenceOptions::Exact() {
  InferenceOptions options;
  options.device = torch::Device(torch::kCPU);
  options.channels_last = false;
  options.backbone_kernels = BackboneKernels::kEager;
  return options;
}

absl::StatusOr<torch::Device> ResolveDevice(absl::string_view spec) {
  if (spec == "auto") return ResolveDevice(InferenceOptions{});
  if (spec == "cpu") return torch::Device(torch::kCPU);
  int index = 0;
  if (spec != "cuda" && !(absl::StartsWith(spec, "cuda:") &&
                          absl::SimpleAtoi(spec.substr(5), &index) && index >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown device \"", spec, "\"; use auto, cpu or cuda:N"));
  }
  return UsableCudaDevice(index, spec);
}

absl::StatusOr<torch::Device> ResolveDevice(const InferenceOptions& options) {
  if (!options.device.has_value()) {
    return torch::cuda::is_available() ? torch::Device(torch::kCUDA, 0)
                                       : torch::Device(torch::kCPU);
  }
  if (!options.device->is_cuda()) return *options.device;
  return UsableCudaDevice(options.device->has_index() ? options.device->index() : 0,
                          options.device->str());
}

std::string PrecisionName(Precision precision) { return NameOf(kPrecisions, precision); }

absl::StatusOr<Precision> ParsePrecision(absl::string_view name) {
  return Parse(kPrecisions, "precision", name);
}

std::string BackboneKernelsName(BackboneKernels kernels) {
  return NameOf(kBackboneKernels, kernels);
}

absl::StatusOr<BackboneKernels> ParseBackboneKernels(absl::string_view name) {
  return Parse(kBackboneKernels, "backbone kernels", name);
}

std::string StepWeightsName(StepWeights weights) { return NameOf(kStepWeights, weights); }

absl::StatusOr<StepWeights> ParseStepWeights(absl::string_view name) {
  return Parse(kStepWeights, "step weights", name);
}

absl::StatusOr<torch::Dtype> BackboneDtype(Precision precision, const torch::Device& device) {
  // A model without a bundle to choose by (VideoModel::Create) runs fp32.
  if (precision == Precision::kFp32 || precision == Precision::kAuto) return torch::kFloat;
  if (precision == Precision::kInt8) {
    if (!device.is_cpu()) {
      return absl::InvalidArgumentError(
          "precision int8 runs on the CPU (oneDNN's VNNI kernels); a GPU runs fp16 or bf16");
    }
    if (!OneDnnResNet18::Int8Available()) {
      return absl::InvalidArgumentError(
          "precision int8 needs a CPU with VNNI instructions (AVX-512 VNNI, AVX-VNNI or AMX); "
          "this CPU runs fp32");
    }
    return torch::kFloat;  // the frames'; the calibration quantizes them
  }
  // CPUs without native half-precision units run these slower than fp32, not faster.
  if (precision == Precision::kBf16 && device.is_cpu()) {
    if (OneDnnResNet18::Bf16Available()) return torch::kBFloat16;
    return absl::InvalidArgumentError(
        "precision bf16 needs a CUDA device, or a CPU with bf16 instructions (AVX-512 BF16 or "
        "AMX); this CPU runs fp32");
  }
  if (!device.is_cuda()) {
    return absl::InvalidArgumentError(absl::StrCat("precision ", PrecisionName(precision),
                                                   " needs a CUDA device; the CPU runs fp32"));
  }
  return precision == Precision::kFp16 ? torch::kHalf : torch::kBFloat16;
}

}  // namespace vidclf::model
