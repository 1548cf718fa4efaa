// ResNet18 with its batch norms folded, run directly on oneDNN's primitives, in float32, where 3x3
// convolutions of stride 1 may use oneDNN's Winograd kernels (F(4x4, 3x3), AVX-512), which
// LibTorch's own oneDNN calls never pick, or in bfloat16 (weights and activations; biases, sums
// and the features in float32) on CPUs with bf16 instructions, or in int8 on CPUs with VNNI
// (weights per output channel, activations per tensor by a calibration: int8_calibration.h;
// int32 accumulation, the pooling in float32). Each residual sum and ReLU runs as a post-op of the
// convolution before it, in place.
//
// `vidclf-backbone-bench` times it beside the other variants (docs/backbone-benchmark.md).
#ifndef VIDCLF_MODEL_ONEDNN_RESNET18_H_
#define VIDCLF_MODEL_ONEDNN_RESNET18_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "model/folded_resnet18.h"
#include "model/int8_calibration.h"

namespace vidclf::model {

class OneDnnResNet18 {
 public:
  // Whether this build has oneDNN and this CPU runs its Winograd kernels.
  static bool WinogradAvailable();
  // Whether this build has oneDNN and this CPU has the bf16 instructions (AVX-512 BF16, AMX) its
  // bf16 kernels need.
  static bool Bf16Available();
  // Whether this build has oneDNN and this CPU has VNNI (AVX-512 VNNI, AVX-VNNI or AMX), which
  // its int8 kernels need to beat fp32.
  static bool Int8Available();

  // Runs `folded` (its weights converted to `dtype`, float32 or bfloat16), holding one copy of the
  // weights, in oneDNN's layout; `folded` may go after. With `winograd` in float32, every 3x3
  // convolution of stride 1 runs Winograd's kernels where oneDNN has them, on copies in their
  // layout (four times the weights of the convolutions that run them). Throws c10::Error where
  // this build has no oneDNN, or bfloat16 is asked where Bf16Available is false.
  OneDnnResNet18(const FoldedResNet18& folded, bool winograd, torch::Dtype dtype = torch::kFloat);
  // Runs `folded` in int8 with the activation ranges of `calibration` (made on these weights).
  // Throws c10::Error where Int8Available is false or the calibration does not fit the network.
  // Keeps a plain copy of the quantized weights too (11 MB), for layouts made after load.
  // oneDNN's int8 Winograd kernels (F(2x2, 3x3)) are not used: on the default models they moved
  // the embeddings 1.6 times as far from fp32's as the direct kernels (2.4% against 1.5%, the
  // median frame), for 8-15% more speed (docs/backbone-benchmark.md).
  OneDnnResNet18(const FoldedResNet18& folded, const Int8Calibration& calibration);
  ~OneDnnResNet18();

  // Whether `other` runs the same weights, bit for bit, the same way.
  bool SameWeights(const OneDnnResNet18& other) const;

  // frames: [N, 3, H, W] on the CPU, float32 or bfloat16, any layout. Returns [N, 512] float32,
  // the average-pooled features. Thread-safe: every call allocates its own activations.
  torch::Tensor forward(const torch::Tensor& frames) const;

  struct Graph;  // oneDNN's objects, kept out of this header

 private:
  std::unique_ptr<Graph> graph_;
};

}  // namespace vidclf::model

#endif  // VIDCLF_MODEL_ONEDNN_RESNET18_H_
