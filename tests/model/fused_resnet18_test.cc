#include "model/fused_resnet18.h"

#include <ATen/Context.h>
#include <gtest/gtest.h>

#include <iostream>
#include <thread>
#include <utility>

#include "model/onednn_resnet18.h"

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

// oneDNN's own primitives, direct and with Winograd's 3x3 kernels, against the eager model: batch
// sizes and frame sizes as the batcher gives them, calls from two threads at once.
TEST(FusedResNet18, WinogradKernelsMatchTheEagerModelWithin1e4) {
  if (!OneDnnResNet18::WinogradAvailable()) GTEST_SKIP() << "no oneDNN Winograd kernels here";
  ResNet18 resnet = RandomResNet18(torch::kFloat);
  torch::InferenceMode inference;
  const FoldedResNet18 folded = FoldBatchNorms(resnet);
  for (const bool winograd : {false, true}) {
    const OneDnnResNet18 onednn(folded, winograd);
    for (const auto& [batch, side] : {std::pair{1, 112}, std::pair{5, 64}, std::pair{16, 112}}) {
      const torch::Tensor frames = torch::randn({batch, 3, side, side});
      const torch::Tensor expected = resnet->forward(frames);
      const torch::Tensor got = onednn.forward(frames);
      ASSERT_EQ(got.sizes(), expected.sizes());
      EXPECT_LT(RelativeError(got, expected), 1e-4)
          << "winograd " << winograd << ", " << batch << " frames of " << side;
    }
  }
  const FusedResNet18 fused(resnet, torch::kCPU, torch::kFloat, /*channels_last=*/true,
                            /*winograd=*/true);
  EXPECT_TRUE(fused.uses_winograd());
  const torch::Tensor frames = torch::randn({4, 3, 112, 112});
  const torch::Tensor expected = resnet->forward(frames);
  torch::Tensor first, second;
  std::thread other([&] {
    torch::InferenceMode thread_inference;
    first = fused.forward(frames);
  });
  second = fused.forward(frames.contiguous(torch::MemoryFormat::ChannelsLast));
  other.join();
  EXPECT_LT(RelativeError(first, expected), 1e-4);
  EXPECT_TRUE(torch::equal(first, second));
  EXPECT_FALSE(fused.SameAs(FusedResNet18(resnet, torch::kCPU, torch::kFloat, true)));
  EXPECT_THROW(fused.forward(torch::randn({4, 3, 112, 96})), c10::Error);
}

// oneDNN's bf16 kernels on a CPU with bf16 instructions against the float32 eager model: within
// what bf16's 8-bit mantissa allows through 20 convolutions, batched as unbatched, from float32 or
// bf16 frames, and through FusedResNet18 as the server builds it for --precision bf16.
TEST(FusedResNet18, Bf16KernelsStayNearTheFloatModel) {
  if (!OneDnnResNet18::Bf16Available()) GTEST_SKIP() << "no bf16 instructions on this CPU";
  ResNet18 resnet = RandomResNet18(torch::kFloat);
  torch::InferenceMode inference;
  const FoldedResNet18 folded = FoldBatchNorms(resnet);
  const OneDnnResNet18 onednn(folded, /*winograd=*/true, torch::kBFloat16);
  const torch::Tensor frames = torch::randn({16, 3, 112, 112});
  const torch::Tensor expected = resnet->forward(frames);
  const torch::Tensor got = onednn.forward(frames);
  ASSERT_EQ(got.scalar_type(), torch::kFloat);
  const double error = RelativeError(got, expected);
  std::cout << "bf16 kernels: relative error " << error << "\n";
  EXPECT_LT(error, 2e-2);
  EXPECT_GT(error, 0) << "bf16 differs from float32 somewhere";
  EXPECT_TRUE(torch::equal(onednn.forward(frames.narrow(0, 3, 1)), got.narrow(0, 3, 1)));
  EXPECT_LT(RelativeError(onednn.forward(frames.to(torch::kBFloat16)), expected), 2e-2);

  const FusedResNet18 fused(resnet, torch::kCPU, torch::kBFloat16, /*channels_last=*/true,
                            /*winograd=*/true);
  EXPECT_FALSE(fused.uses_winograd()) << "Winograd's kernels are float32's only";
  const torch::Tensor from_fused = fused.forward(frames.to(torch::kBFloat16));
  EXPECT_EQ(from_fused.scalar_type(), torch::kFloat) << "oneDNN's float32 features, not rounded";
  EXPECT_LT(RelativeError(from_fused, expected), 2e-2);
  EXPECT_FALSE(fused.SameAs(FusedResNet18(resnet, torch::kCPU, torch::kFloat, true, true)));
}

// oneDNN's int8 kernels on a CPU with VNNI against the float32 eager model, calibrated on other
// frames of the same distribution: batched as unbatched, and through FusedResNet18 as the server
// builds it for --precision int8.
TEST(FusedResNet18, Int8KernelsStayNearTheFloatModel) {
  if (!OneDnnResNet18::Int8Available()) GTEST_SKIP() << "no VNNI instructions on this CPU";
  ResNet18 resnet = RandomResNet18(torch::kFloat);
  torch::InferenceMode inference;
  absl::StatusOr<Int8Calibration> calibration =
      CalibrateInt8(resnet, {torch::randn({32, 3, 112, 112}), torch::randn({32, 3, 112, 112})});
  ASSERT_TRUE(calibration.ok()) << calibration.status();
  EXPECT_EQ(calibration->frames, 64);
  EXPECT_EQ(calibration->output_max.size(), 20u);
  const OneDnnResNet18 onednn(FoldBatchNorms(resnet), *calibration);
  const torch::Tensor frames = torch::randn({16, 3, 112, 112});
  const torch::Tensor expected = resnet->forward(frames);
  const torch::Tensor got = onednn.forward(frames);
  ASSERT_EQ(got.scalar_type(), torch::kFloat);
  const double error = RelativeError(got, expected);
  const double per_frame =
      ((got - expected).norm(2, 1) / expected.norm(2, 1)).median().item<double>();
  std::cout << "int8 kernels: relative error " << error << ", median per frame " << per_frame
            << "\n";
  // Measured 0.75% (0.66% the median frame): int8's 8 bits through 20 convolutions.
  EXPECT_LT(error, 1.5e-2);
  EXPECT_GT(error, 0) << "int8 differs from float32 somewhere";
  // Without the input means the biases are not corrected for the weights' rounding: measured
  // 1.8%.
  Int8Calibration uncorrected = *calibration;
  uncorrected.input_mean.clear();
  const double uncorrected_error =
      RelativeError(OneDnnResNet18(FoldBatchNorms(resnet), uncorrected).forward(frames), expected);
  EXPECT_LT(error, 0.6 * uncorrected_error);
  EXPECT_TRUE(torch::equal(onednn.forward(frames.narrow(0, 3, 1)), got.narrow(0, 3, 1)));

  const FusedResNet18 fused(resnet, torch::kCPU, torch::kFloat, /*channels_last=*/true,
                            /*winograd=*/true, *calibration);
  EXPECT_FALSE(fused.uses_winograd());
  EXPECT_TRUE(torch::equal(fused.forward(frames), got));
  EXPECT_FALSE(fused.SameAs(FusedResNet18(resnet, torch::kCPU, torch::kFloat, true, true)));
  Int8Calibration other = *calibration;
  other.output_max[5] *= 2;
  EXPECT_FALSE(fused.SameAs(FusedResNet18(resnet, torch::kCPU, torch::kFloat, true, true, other)));
  other.output_max.pop_back();
  EXPECT_THROW(OneDnnResNet18(FoldBatchNorms(resnet), other), c10::Error);
  other = *calibration;
  other.input_mean[4].pop_back();
  EXPECT_THROW(OneDnnResNet18(FoldBatchNorms(resnet), other), c10::Error);
  other.input_mean.pop_back();
  EXPECT_THROW(OneDnnResNet18(FoldBatchNorms(resnet), other), c10::Error);
}

}  // namespace
}  // namespace vidclf::model
