// Where and how a model runs: vidclf-server's --device, --precision, --memory-format,
// --backbone-kernels, --stream-step and --stream-step-weights as typed options. The defaults are
// the server's, so that a test or benchmark that builds default options gets the model users run;
// Exact() is the model as trained, which training, export and reference comparisons use.
#ifndef VIDCLF_MODEL_INFERENCE_OPTIONS_H_
#define VIDCLF_MODEL_INFERENCE_OPTIONS_H_

#include <torch/torch.h>

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace vidclf::model {

// Backbone arithmetic. The head always runs in fp32: it is small, and the normalisers of softmax
// and linear attention are where low precision hurts. kInt8: on a CPU with VNNI, by the bundle's
// calibration (int8_calibration.h). kAuto: each bundle's own choice on its device
// (model/precision_choice.h), made as VideoModel::Load loads it.
enum class Precision { kFp32, kFp16, kBf16, kInt8, kAuto };

// How the backbone runs.
enum class BackboneKernels {
  kEager,  // the module as trained
  // FusedResNet18 (fused_resnet18.h): batch norm folded into the convolutions, oneDNN's
  // pre-packed kernels on the CPU in fp32. The eager backbone is then released: backbone() is
  // unavailable and the model cannot be saved. Models whose fused backbones have the same weights
  // share one (FusedResNet18::Shared).
  kFused,
  // kFused, with the 3x3 convolutions of stride 1 on oneDNN's Winograd kernels where they run (the
  // CPU in fp32; onednn_resnet18.h). Embeddings stay within 1e-4 of the eager model's, relatively.
  kWinograd,
};

// The weights a live stream's one new frame steps through, on the CPU, where the head has such a
// step (TemporalHead::UseInt8StepWeights: the causal-linear transformer). int8 copies with one
// scale per output row read a quarter of the bytes; the probabilities move by what
// docs/streaming-benchmark.md measures.
enum class StepWeights { kFloat32, kInt8 };

struct InferenceOptions {
  // Unset: the first CUDA device when there is one, else the CPU.
  std::optional<torch::Device> device;
  Precision precision = Precision::kFp32;
  // Backbone activations and convolution weights in channels-last (NHWC) layout, which cuDNN's
  // tensor-core kernels and oneDNN prefer. Outputs are the same up to rounding.
  bool channels_last = true;
  BackboneKernels backbone_kernels = BackboneKernels::kWinograd;
  // On CUDA, step a single stream's recurrent transformer head (StreamStep with batch 1) by
  // replaying a CUDA graph captured at load (heads/step_graph.h) rather than launching each
  // operation. Outputs are the same up to rounding. Ignored on the CPU.
  bool cuda_graph_step = true;
  StepWeights step_weights = StepWeights::kFloat32;

  // The model exactly as trained: the CPU, fp32, NCHW, the eager backbone (which can be saved).
  static InferenceOptions Exact();
};

// The device `spec` names ("auto", "cpu", "cuda", "cuda:N"). INVALID_ARGUMENT for a malformed
// spec; FAILED_PRECONDITION for a CUDA device this process cannot use (no CUDA in this LibTorch,
// no GPU, or N out of range).
absl::StatusOr<torch::Device> ResolveDevice(absl::string_view spec);
// The device `options` ask for, "auto" resolved, with the same errors.
absl::StatusOr<torch::Device> ResolveDevice(const InferenceOptions& options);

// The names of the server's flags; parsing an unknown name is INVALID_ARGUMENT listing the known.
std::string PrecisionName(Precision precision);
absl::StatusOr<Precision> ParsePrecision(absl::string_view name);
std::string BackboneKernelsName(BackboneKernels kernels);
absl::StatusOr<BackboneKernels> ParseBackboneKernels(absl::string_view name);
std::string StepWeightsName(StepWeights weights);
absl::StatusOr<StepWeights> ParseStepWeights(absl::string_view name);

// The backbone dtype of `precision` on `device`: INVALID_ARGUMENT for half precision off CUDA,
// but for bf16 on a CPU that has bf16 instructions (oneDNN's kernels run it there), and for int8
// anywhere but a CPU with VNNI (where its frames stay float32: the calibration quantizes them).
absl::StatusOr<torch::Dtype> BackboneDtype(Precision precision, const torch::Device& device);

}  // namespace vidclf::model

#endif  // VIDCLF_MODEL_INFERENCE_OPTIONS_H_
