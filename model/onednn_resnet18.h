// ResNet18 with its batch norms folded, run directly on oneDNN's primitives, where 3x3
// convolutions of stride 1 may use oneDNN's Winograd kernels (F(4x4, 3x3), AVX-512), which
// LibTorch's own oneDNN calls never pick. Each residual sum and ReLU runs as a post-op of the
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

namespace vidclf::model {

class OneDnnResNet18 {
 public:
  // Whether this build has oneDNN and this CPU runs its Winograd kernels.
  static bool WinogradAvailable();

  // Runs `folded` (its weights converted to float32), holding one copy of the weights, in
  // oneDNN's layout; `folded` may go after. With `winograd`, every 3x3 convolution of stride 1
  // runs Winograd's kernels where oneDNN has them, on copies in their layout (four times the
  // weights of the convolutions that run them). Throws c10::Error where this build has no oneDNN.
  OneDnnResNet18(const FoldedResNet18& folded, bool winograd);
  ~OneDnnResNet18();

  // Whether `other` runs the same weights, bit for bit, the same way.
  bool SameWeights(const OneDnnResNet18& other) const;

  // frames: [N, 3, H, W] float32 on the CPU, any layout. Returns [N, 512], the average-pooled
  // features. Thread-safe: every call allocates its own activations.
  torch::Tensor forward(const torch::Tensor& frames) const;

  struct Graph;  // oneDNN's objects, kept out of this header

 private:
  std::unique_ptr<Graph> graph_;
};

}  // namespace vidclf::model

#endif  // VIDCLF_MODEL_ONEDNN_RESNET18_H_
