#include "model/resnet18.h"

namespace vidclf::model {
namespace {

torch::nn::Conv2d Conv(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding) {
  return torch::nn::Conv2d(
      torch::nn::Conv2dOptions(in, out, kernel).stride(stride).padding(padding).bias(false));
}

torch::nn::Sequential Stage(int64_t in_channels, int64_t out_channels, int64_t stride) {
  return torch::nn::Sequential(BasicBlock(in_channels, out_channels, stride),
                               BasicBlock(out_channels, out_channels, 1));
}

}  // namespace

BasicBlockImpl::BasicBlockImpl(int64_t in_channels, int64_t out_channels, int64_t stride)
    : conv1(register_module("conv1", Conv(in_channels, out_channels, 3, stride, 1))),
      conv2(register_module("conv2", Conv(out_channels, out_channels, 3, 1, 1))),
      bn1(register_module("bn1", torch::nn::BatchNorm2d(out_channels))),
      bn2(register_module("bn2", torch::nn::BatchNorm2d(out_channels))) {
  if (stride != 1 || in_channels != out_channels) {
    downsample = register_module(
        "downsample", torch::nn::Sequential(Conv(in_channels, out_channels, 1, stride, 0),
                                            torch::nn::BatchNorm2d(out_channels)));
  }
}

torch::Tensor BasicBlockImpl::forward(const torch::Tensor& x) {
  torch::Tensor out = torch::relu(bn1(conv1(x)));
  out = bn2(conv2(out));
  const torch::Tensor identity = downsample.is_empty() ? x : downsample->forward(x);
  return torch::relu(out + identity);
}

ResNet18Impl::ResNet18Impl()
    : conv1(register_module("conv1", Conv(3, 64, 7, 2, 3))),
      bn1(register_module("bn1", torch::nn::BatchNorm2d(64))),
      layer1(register_module("layer1", Stage(64, 64, 1))),
      layer2(register_module("layer2", Stage(64, 128, 2))),
      layer3(register_module("layer3", Stage(128, 256, 2))),
      layer4(register_module("layer4", Stage(256, 512, 2))),
      fc(register_module("fc", torch::nn::Linear(kResNet18EmbeddingSize, 1000))) {
  torch::NoGradGuard no_grad;
  for (auto& module : modules(/*include_self=*/false)) {
    if (auto* conv = module->as<torch::nn::Conv2d>()) {
      torch::nn::init::kaiming_normal_(conv->weight, /*a=*/0, torch::kFanOut, torch::kReLU);
    } else if (auto* norm = module->as<torch::nn::BatchNorm2d>()) {
      torch::nn::init::ones_(norm->weight);
      torch::nn::init::zeros_(norm->bias);
    }
  }
}

torch::Tensor ResNet18Impl::forward(const torch::Tensor& frames) {
  TORCH_CHECK(frames.dim() == 4 && frames.size(1) == 3,
              "ResNet18 expects frames shaped [N, 3, H, W]; got ", frames.sizes());
  torch::Tensor x = torch::relu(bn1(conv1(frames)));
  x = torch::max_pool2d(x, /*kernel_size=*/3, /*stride=*/2, /*padding=*/1);
  x = layer4->forward(layer3->forward(layer2->forward(layer1->forward(x))));
  return torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
}

}  // namespace vidclf::model
