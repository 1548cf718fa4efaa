#include "model/fused_resnet18.h"

#include <ATen/Context.h>
#include <gtest/gtest.h>

#include <thread>

namespace vidclf::model {
namespace {

// A ResNet18 in eval mode whose batch norms are far from identities, so that folding shows.
ResNet18 RandomResNet18(torch::Dtype dtype) {
  torch::manual_seed(21);
  ResNet18 resnet;
  torch::NoGradGuard no_grad;
  for (auto& module : resnet->modules(/*include_self=*/false)) {
    if (auto* norm = module->as<torch::nn::BatchNorm2dImpl>()) {
      norm->running_mean.uniform_(-0.5, 0.5);
      norm->running_var.uniform_(0.25, 2.0);
      norm->weight.uniform_(0.5, 1.5);
      norm->bias.uniform_(-0.5, 0.5);
    }
  }
  resnet->to(dtype);
  resnet->eval();
  return resnet;
}

double RelativeError(const torch::Tensor& got, const torch::Tensor& expected) {
  return ((got - expected).abs().max() / expected.abs().max()).item<double>();
}

TEST(FusedResNet18, FoldsEveryBatchNormExactlyInFloat64) {
  ResNet18 resnet = RandomResNet18(torch::kDouble);
  torch::InferenceMode inference;
  const torch::Tensor frames = torch::randn({2, 3, 48, 40}, torch::kDouble);
  const torch::Tensor expected = resnet->forward(frames);
  for (const bool channels_last : {false, true}) {
    const FusedResNet18 fused(resnet, torch::kCPU, torch::kDouble, channels_last);
    EXPECT_FALSE(fused.uses_onednn());  // oneDNN runs fp32 only
    EXPECT_LT(RelativeError(fused.forward(frames), expected), 1e-12) << channels_last;
  }
}

TEST(FusedResNet18, OneDnnKernelsMatchTheEagerModelWithin1e4) {
  ASSERT_TRUE(at::hasMKLDNN()) << "this LibTorch has no oneDNN";
  ResNet18 resnet = RandomResNet18(torch::kFloat);
  torch::InferenceMode inference;
  const FusedResNet18 fused(resnet, torch::kCPU, torch::kFloat, /*channels_last=*/true);
  EXPECT_TRUE(fused.uses_onednn());
  const torch::Tensor frames = torch::randn({3, 3, 64, 64});
  const torch::Tensor expected = resnet->forward(frames);
  const torch::Tensor got = fused.forward(frames);
  EXPECT_EQ(got.sizes(), expected.sizes());
  EXPECT_LT(RelativeError(got, expected), 1e-4);
  EXPECT_LT(
      RelativeError(fused.forward(frames.contiguous(torch::MemoryFormat::ChannelsLast)), expected),
      1e-4);
  // Shared by the server's threads: concurrent calls read the weights only.
  torch::Tensor first, second;
  std::thread other([&] {
    torch::InferenceMode thread_inference;
    first = fused.forward(frames);
  });
  second = fused.forward(frames);
  other.join();
  EXPECT_TRUE(torch::equal(first, second));
  EXPECT_THROW(fused.forward(torch::randn({3, 64, 64})), c10::Error);
}

}  // namespace
}  // namespace vidclf::model
