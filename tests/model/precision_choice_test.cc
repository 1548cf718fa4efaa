#include "model/precision_choice.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/onednn_resnet18.h"

namespace vidclf::model {
namespace {

using ::testing::HasSubstr;

// A bundle's config whose metrics record the bf16 evaluation eval writes.
ModelConfig Recording(int64_t same_top1, int64_t clips, double accuracy_fp32, double accuracy) {
  ModelConfig config;
  config.metrics["backbone_precision"]["bf16"] = {{"same_top1", same_top1},
                                                  {"clips", clips},
                                                  {"accuracy_fp32", accuracy_fp32},
                                                  {"accuracy", accuracy}};
  return config;
}

// --precision auto: bf16 only for a bundle that records a bf16 evaluation within the bar, on a CPU
// that runs bf16; each fp32 says why.
TEST(PrecisionChoice, Bf16OnlyWhereTheBundleRecordsItWithinTheBarAndTheCpuRunsIt) {
  const torch::Device cpu(torch::kCPU);
  const PrecisionChoice within = ChoosePrecision(Recording(449, 450, 0.9511, 0.9533), cpu);
  const PrecisionChoice unrecorded = ChoosePrecision(ModelConfig(), cpu);
  const PrecisionChoice disagreeing = ChoosePrecision(Recording(440, 450, 0.95, 0.95), cpu);
  const PrecisionChoice less_accurate = ChoosePrecision(Recording(450, 450, 0.95, 0.944), cpu);
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

}  // namespace
}  // namespace vidclf::model
