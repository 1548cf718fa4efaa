#include "model/fused_resnet18.h"

#include <ATen/Context.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <thread>

#include "model/video_model.h"

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

TEST(FusedResNet18, VideoModelEmbedsLikeTheEagerBackboneAndReleasesIt) {
  ModelConfig config;
  config.name = "tiny";
  config.version = "1";
  config.labels = {"a", "b"};
  config.input.num_frames = 4;
  config.input.resize_shorter_side = 40;
  config.input.crop_size = 32;
  const std::string dir = ::testing::TempDir() + "/vidclf_fused_" + std::to_string(::getpid());
  torch::manual_seed(22);
  ASSERT_TRUE((*VideoModel::Create(config))->Save(dir).ok());
  InferenceOptions options;
  options.channels_last = true;
  options.fuse_backbone = true;
  auto fused = VideoModel::Load(dir, options);
  auto eager = VideoModel::Load(dir);
  ASSERT_TRUE(fused.ok() && eager.ok());
  EXPECT_TRUE((*fused)->fused_backbone());
  const torch::Tensor frames = torch::randn({5, 3, 32, 32});
  auto a = (*fused)->Embed(frames, /*max_batch_frames=*/2);
  auto b = (*eager)->Embed(frames);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_LT(RelativeError(*a, *b), 1e-4);
  EXPECT_THROW((*fused)->backbone(), c10::Error);
  EXPECT_EQ((*fused)->Save(dir).code(), absl::StatusCode::kFailedPrecondition);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace vidclf::model
