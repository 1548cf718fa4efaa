// ResNet18's convolutions with their batch norms folded in, the weights that the fused backbones
// (fused_resnet18.h, onednn_resnet18.h) run.
#ifndef VIDCLF_MODEL_FOLDED_RESNET18_H_
#define VIDCLF_MODEL_FOLDED_RESNET18_H_

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "model/resnet18.h"

namespace vidclf::model {

// A convolution with its batch norm folded in: weight W * g / sqrt(v + eps) [out, in, k, k], bias
// b - m * g / sqrt(v + eps) [out].
struct FoldedConvolution {
  torch::Tensor weight, bias;
  int64_t stride = 1, padding = 0;
};

// A basic block: conv1, ReLU, conv2, plus the input (through `downsample` when present), ReLU.
struct FoldedBlock {
  FoldedConvolution conv1, conv2;
  std::optional<FoldedConvolution> downsample;
};

// Every convolution of `resnet` with its batch norm (the running statistics, as eval mode uses
// them) folded in, in float64 on the CPU, so that folding adds no rounding: the stem, then each
// block's.
struct FoldedResNet18 {
  FoldedConvolution stem;
  std::vector<FoldedBlock> blocks;
};
FoldedResNet18 FoldBatchNorms(const ResNet18& resnet);

}  // namespace vidclf::model

#endif  // VIDCLF_MODEL_FOLDED_RESNET18_H_
