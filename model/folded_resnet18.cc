#include "model/folded_resnet18.h"

namespace vidclf::model {
namespace {

// `conv` with `norm` folded in, in float64 on the CPU.
FoldedConvolution Fold(const torch::nn::Conv2dImpl& conv, const torch::nn::BatchNorm2dImpl& norm) {
  const torch::Tensor weight = conv.weight.to(torch::kCPU, torch::kDouble);
  TORCH_CHECK(weight.size(2) == weight.size(3) && weight.size(2) % 2 == 1,
              "fused ResNet18 expects square kernels of odd size; got ", weight.sizes());
  const torch::Tensor scale =
      norm.weight.to(torch::kCPU, torch::kDouble) /
      torch::sqrt(norm.running_var.to(torch::kCPU, torch::kDouble) + norm.options.eps());
  FoldedConvolution folded;
  folded.stride = (*conv.options.stride())[0];
  folded.padding = weight.size(2) / 2;  // torchvision pads every convolution to keep its centre
  folded.weight = (weight * scale.view({-1, 1, 1, 1})).contiguous();
  folded.bias = norm.bias.to(torch::kCPU, torch::kDouble) -
                norm.running_mean.to(torch::kCPU, torch::kDouble) * scale;
  return folded;
}

}  // namespace

FoldedResNet18 FoldBatchNorms(const ResNet18& resnet) {
  torch::NoGradGuard no_grad;
  FoldedResNet18 folded;
  folded.stem = Fold(*resnet->conv1, *resnet->bn1);
  for (const torch::nn::Sequential* stage :
       {&resnet->layer1, &resnet->layer2, &resnet->layer3, &resnet->layer4}) {
    for (const auto& child : (*stage)->children()) {
      const auto& block = *child->as<BasicBlockImpl>();
      FoldedBlock out;
      out.conv1 = Fold(*block.conv1, *block.bn1);
      out.conv2 = Fold(*block.conv2, *block.bn2);
      if (!block.downsample.is_empty()) {
        torch::nn::Sequential downsample = block.downsample;  // a handle; operator[] is not const
        out.downsample = Fold(*downsample[0]->as<torch::nn::Conv2dImpl>(),
                              *downsample[1]->as<torch::nn::BatchNorm2dImpl>());
      }
      folded.blocks.push_back(std::move(out));
    }
  }
  return folded;
}

}  // namespace vidclf::model
