#include "model/inference_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/onednn_resnet18.h"

namespace vidclf::model {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(InferenceOptions, NamesParseBackAndUnknownOnesListTheKnown) {
  for (const Precision precision :
       {Precision::kFp32, Precision::kFp16, Precision::kBf16, Precision::kAuto}) {
    EXPECT_EQ(*ParsePrecision(PrecisionName(precision)), precision);
  }
  for (const BackboneKernels kernels :
       {BackboneKernels::kEager, BackboneKernels::kFused, BackboneKernels::kWinograd}) {
    EXPECT_EQ(*ParseBackboneKernels(BackboneKernelsName(kernels)), kernels);
  }
  for (const StepWeights weights : {StepWeights::kFloat32, StepWeights::kInt8}) {
    EXPECT_EQ(*ParseStepWeights(StepWeightsName(weights)), weights);
  }
  const absl::Status unknown = ParseBackboneKernels("winnograd").status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unknown.message()),
              AllOf(HasSubstr("\"winnograd\""), HasSubstr("eager, fused, winograd")));
}

// The defaults are vidclf-server's (--device auto, channels-last, winograd); Exact() is the model
// as trained.
TEST(InferenceOptions, DefaultsAreTheServersAndExactIsTheModelAsTrained) {
  const InferenceOptions server;
  EXPECT_FALSE(server.device.has_value());
  EXPECT_EQ(ResolveDevice(server)->is_cuda(), torch::cuda::is_available());
  EXPECT_EQ(server.precision, Precision::kFp32);
  EXPECT_TRUE(server.channels_last);
  EXPECT_EQ(server.backbone_kernels, BackboneKernels::kWinograd);
  EXPECT_EQ(server.step_weights, StepWeights::kFloat32);
  const InferenceOptions exact = InferenceOptions::Exact();
  EXPECT_EQ(*ResolveDevice(exact), torch::Device(torch::kCPU));
  EXPECT_FALSE(exact.channels_last);
  EXPECT_EQ(exact.backbone_kernels, BackboneKernels::kEager);
}

TEST(InferenceOptions, HalfPrecisionNeedsCudaOrBf16InstructionsAndAMissingGpuIsNamed) {
  const torch::Device cpu(torch::kCPU);
  EXPECT_EQ(*BackboneDtype(Precision::kFp32, cpu), torch::kFloat);
  const absl::Status half = BackboneDtype(Precision::kFp16, cpu).status();
  EXPECT_EQ(half.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(half.message()), HasSubstr("fp16 needs a CUDA device"));
  const absl::StatusOr<torch::Dtype> bf16 = BackboneDtype(Precision::kBf16, cpu);
  if (OneDnnResNet18::Bf16Available()) {
    EXPECT_EQ(*bf16, torch::kBFloat16);
  } else {
    EXPECT_EQ(bf16.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(bf16.status().message()), HasSubstr("bf16 instructions"));
  }
  InferenceOptions far;
  far.device = torch::Device(torch::kCUDA, 99);
  const absl::Status missing = ResolveDevice(far).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(missing.message()), HasSubstr("cuda:99"));
}

}  // namespace
}  // namespace vidclf::model
