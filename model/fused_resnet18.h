// ResNet18 prepared for inference: every batch norm folded into the convolution before it, and
// on the CPU in fp32 the convolutions run as oneDNN kernels on weights reordered once, at load,
// into oneDNN's blocked layout, with activations kept in that layout from the first convolution to
// the pooling. Eager ResNet18 in eval mode spends its time elsewhere: one pass over memory per
// batch norm, and a weight reorder on every oneDNN call (docs/backbone-benchmark.md measures the
// difference). Outputs equal the eager module's up to float rounding.
#ifndef VIDCLF_MODEL_FUSED_RESNET18_H_
#define VIDCLF_MODEL_FUSED_RESNET18_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "model/folded_resnet18.h"
#include "model/int8_calibration.h"
#include "model/resnet18.h"

namespace vidclf::model {

class OneDnnResNet18;

class FusedResNet18 {
 public:
  // Folds the weights of `resnet` (its batch-norm running statistics, as eval mode uses them) and
  // places them on `device` in `dtype`, channels-last when asked (ignored where oneDNN runs).
  // With `winograd`, on the CPU in fp32 where oneDNN's Winograd kernels run
  // (OneDnnResNet18::WinogradAvailable), the 3x3 convolutions of stride 1 run them. On the CPU in
  // bf16, oneDNN's bf16 kernels run it where the CPU has their instructions
  // (OneDnnResNet18::Bf16Available). With `int8`, on the CPU, oneDNN's int8 kernels run it with
  // those activation ranges (OneDnnResNet18::Int8Available; `dtype` is then the frames', float32).
  // Throws c10::Error.
  FusedResNet18(const ResNet18& resnet, const torch::Device& device, torch::Dtype dtype,
                bool channels_last, bool winograd = false,
                const std::optional<Int8Calibration>& int8 = std::nullopt);
  ~FusedResNet18();

  // frames: [N, 3, H, W] on the device in its dtype, H and W at least 32. Returns [N, 512] in the
  // frames' dtype, but float32 where oneDNN's own primitives run (Winograd's kernels, bf16 or int8
  // on the CPU), whose pooled features are float32: rounding them to bf16 would add up to 0.4% to
  // each. Only reads the weights: any number of threads may call it at once.
  torch::Tensor forward(const torch::Tensor& frames) const;

  // A fused `resnet` shared with every live one of the same weights and placement: models whose
  // heads were trained on one frozen backbone (the demo repository's three) hold its 45 MB of
  // weights once, and reloading an unchanged bundle adds none. Thread-safe. Throws c10::Error.
  static std::shared_ptr<const FusedResNet18> Shared(
      const ResNet18& resnet, const torch::Device& device, torch::Dtype dtype, bool channels_last,
      bool winograd = false, const std::optional<Int8Calibration>& int8 = std::nullopt);

  // Whether the convolutions run as oneDNN kernels on pre-reordered weights.
  bool uses_onednn() const { return onednn_; }
  // Whether the 3x3 convolutions of stride 1 run oneDNN's Winograd kernels.
  bool uses_winograd() const { return winograd_; }

  // Whether `other` computes exactly what this does: the same folded weights, bit for bit, on the
  // same device in the same dtype and layout.
  bool SameAs(const FusedResNet18& other) const;

 private:
  // `folded` on `placement`, in the layout its kernels read.
  FoldedConvolution Place(const FoldedConvolution& folded,
                          const torch::TensorOptions& placement) const;
  torch::Tensor Convolve(const torch::Tensor& x, const FoldedConvolution& conv) const;
  // Every folded convolution, in the order forward runs them.
  std::vector<const FoldedConvolution*> Convolutions() const;

  bool channels_last_;
  bool onednn_;
  FoldedConvolution stem_;
  std::vector<FoldedBlock> blocks_;
  bool winograd_;
  // Runs forward instead where Winograd's kernels were asked for and run, or in bf16 or int8 on
  // the CPU;
  // stem_ and blocks_ are then empty, and it holds the only copy of the weights.
  std::unique_ptr<OneDnnResNet18> primitives_;
};

}  // namespace vidclf::model

#endif  // VIDCLF_MODEL_FUSED_RESNET18_H_
