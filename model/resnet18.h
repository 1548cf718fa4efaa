// ResNet18 as torchvision builds it, as a frame embedder.
//
// Module, parameter and buffer names are torchvision's (conv1.weight, layer1.0.bn1.running_mean,
// layer2.0.downsample.0.weight, fc.bias, ...), so a state dict exported from torchvision loads
// unchanged. `forward` returns the 512-d globally average-pooled features; `fc` is kept only so
// that the names match and is not applied.
#ifndef VIDCLF_MODEL_RESNET18_H_
#define VIDCLF_MODEL_RESNET18_H_

#include <torch/torch.h>

#include <cstdint>

namespace vidclf::model {

// Width of the embedding ResNet18 produces for each frame.
inline constexpr int64_t kResNet18EmbeddingSize = 512;

struct BasicBlockImpl : torch::nn::Module {
  BasicBlockImpl(int64_t in_channels, int64_t out_channels, int64_t stride);
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  // Empty (is_empty()) when the block keeps its input's shape.
  torch::nn::Sequential downsample{nullptr};
};
TORCH_MODULE(BasicBlock);

class ResNet18Impl : public torch::nn::Module {
 public:
  // Initialises weights as torchvision does (Kaiming-normal convolutions, unit batch norms) from
  // the global torch RNG: seed it with torch::manual_seed for reproducible weights.
  ResNet18Impl();

  // frames: [N, 3, H, W] float, normalised; H and W at least 32. Returns [N, 512].
  torch::Tensor forward(const torch::Tensor& frames);

  torch::nn::Conv2d conv1{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr};
  torch::nn::Sequential layer1{nullptr}, layer2{nullptr}, layer3{nullptr}, layer4{nullptr};
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(ResNet18);

}  // namespace vidclf::model

#endif  // VIDCLF_MODEL_RESNET18_H_
