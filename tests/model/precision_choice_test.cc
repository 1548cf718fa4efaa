#include "model/precision_choice.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "model/onednn_resnet18.h"

namespace vidclf::model {
namespace {

using ::testing::HasSubstr;

// A bundle's config whose metrics record the evaluation of `precision` that eval writes.
ModelConfig Recording(int64_t same_top1, int64_t clips, double accuracy_fp32, double accuracy,
                      ModelConfig config = ModelConfig(), const std::string& precision = "bf16") {
  config.metrics["backbone_precision"][precision] = {{"same_top1", same_top1},
                                                     {"clips", clips},
                                                     {"accuracy_fp32", accuracy_fp32},
                                                     {"accuracy", accuracy}};
  return config;
}

// --precision auto: bf16 only for a bundle that records a bf16 evaluation within the bar, on a CPU
// that runs bf16; each fp32 says why.
TEST(PrecisionChoice, Bf16OnlyWhereTheBundleRecordsItWithinTheBarAndTheCpuRunsIt) {
  const torch::Device cpu(torch::kCPU);
  const PrecisionChoice within = ChoosePrecision(Recording(449, 450, 0.9511, 0.9533), cpu, false);
  const PrecisionChoice unrecorded = ChoosePrecision(ModelConfig(), cpu, false);
  const PrecisionChoice disagreeing = ChoosePrecision(Recording(440, 450, 0.95, 0.95), cpu, false);
  const PrecisionChoice less_accurate =
      ChoosePrecision(Recording(450, 450, 0.95, 0.944), cpu, false);
  if (!OneDnnResNet18::Bf16Available()) {
    for (const PrecisionChoice& choice : {within, unrecorded, disagreeing, less_accurate}) {
      EXPECT_EQ(choice.precision, Precision::kFp32);
      EXPECT_THAT(choice.reason, HasSubstr("no bf16 instructions on this CPU"));
    }
    return;
  }
  EXPECT_EQ(within.precision, Precision::kBf16);
  EXPECT_THAT(within.reason,
              HasSubstr("meets the bar (449 of 450 clips the same top class as fp32, accuracy "
                        "+0.22 points)"));
  EXPECT_EQ(unrecorded.precision, Precision::kFp32);
  EXPECT_THAT(unrecorded.reason, HasSubstr("records no bf16 evaluation"));
  EXPECT_EQ(disagreeing.precision, Precision::kFp32);
  EXPECT_THAT(disagreeing.reason, HasSubstr("misses the bar (440 of 450"));
  EXPECT_EQ(less_accurate.precision, Precision::kFp32);
  EXPECT_THAT(less_accurate.reason, HasSubstr("accuracy -0.60 points"));
}

// int8 before bf16, only for a calibrated bundle that records an int8 evaluation within the bar,
// on a CPU with VNNI; never on a GPU.
TEST(PrecisionChoice, Int8FirstWhereCalibratedAndItsEvaluationMeetsTheBar) {
  const torch::Device cpu(torch::kCPU);
  const ModelConfig both = Recording(450, 450, 0.95, 0.95, Recording(449, 450, 0.95, 0.95), "int8");
  const ModelConfig int8_misses =
      Recording(430, 450, 0.95, 0.95, Recording(449, 450, 0.95, 0.95), "int8");
  const ModelConfig int8_only = Recording(450, 450, 0.95, 0.95, ModelConfig(), "int8");
  EXPECT_EQ(ChoosePrecision(both, torch::Device(torch::kCUDA, 0), true).precision,
            Precision::kBf16);
  if (!OneDnnResNet18::Int8Available()) {
    EXPECT_THAT(ChoosePrecision(int8_only, cpu, true).reason,
                HasSubstr("no VNNI instructions on this CPU for int8"));
    GTEST_SKIP() << "no VNNI instructions on this CPU";
  }
  const PrecisionChoice chosen = ChoosePrecision(both, cpu, true);
  EXPECT_EQ(chosen.precision, Precision::kInt8);
  EXPECT_THAT(chosen.reason, HasSubstr("int8: this CPU has VNNI, and the bundle's int8 evaluation "
                                       "meets the bar (450 of 450 clips"));
  const Precision without_int8 =
      OneDnnResNet18::Bf16Available() ? Precision::kBf16 : Precision::kFp32;
  EXPECT_EQ(ChoosePrecision(both, cpu, false).precision, without_int8);
  EXPECT_EQ(ChoosePrecision(int8_misses, cpu, true).precision, without_int8);
  const PrecisionChoice uncalibrated = ChoosePrecision(int8_only, cpu, false);
  EXPECT_EQ(uncalibrated.precision, Precision::kFp32);
  EXPECT_THAT(uncalibrated.reason,
              HasSubstr("; the bundle has no int8 calibration (vidclf-train calibrate"));
  EXPECT_THAT(
      ChoosePrecision(Recording(430, 450, 0.95, 0.95, ModelConfig(), "int8"), cpu, true).reason,
      HasSubstr("the bundle's int8 evaluation misses the bar (430 of 450"));
}

}  // namespace
}  // namespace vidclf::model
