#include "model/attention/nystrom_attention.h"

#include <gtest/gtest.h>

#include "tests/model/attention/reference.h"

namespace vidclf::model::attention {
namespace {

using testing::MaxAbs;

AttentionOptions NystromOptions(int64_t landmarks, int64_t iterations) {
  AttentionOptions options;
  options.type = "nystrom";
  options.head_dim = 16;
  options.value_dim = 3;
  options.parameters["nystrom_landmarks"] = landmarks;
  options.parameters["nystrom_pinv_iterations"] = iterations;
  return options;
}

TEST(NystromLandmarks, AreMeansOfConsecutiveSegmentsOfTheRealRows) {
  const torch::Tensor x = torch::arange(12, torch::kFloat64).view({1, 1, 6, 2});
  // m = 1: the column mean; m = n: the rows themselves; m = 3: pairs; m > n: rows, then zeros.
  EXPECT_TRUE(torch::allclose(NystromLandmarks(x, {}, 1), x.mean(2, /*keepdim=*/true)));
  EXPECT_TRUE(torch::allclose(NystromLandmarks(x, {}, 6), x));
  EXPECT_TRUE(torch::allclose(
      NystromLandmarks(x, {}, 3),
      torch::tensor({1.0, 2.0, 5.0, 6.0, 9.0, 10.0}, torch::kFloat64).view({1, 1, 3, 2})));
  const torch::Tensor more = NystromLandmarks(x, {}, 8);
  EXPECT_TRUE(torch::allclose(more.slice(2, 0, 6), x));
  EXPECT_EQ(MaxAbs(more.slice(2, 6)), 0);
  // n = 5 real rows (the sixth is padding), m = 2: unequal segments of 3 and 2 rows.
  const torch::Tensor mask = testing::LengthMask({5}, 6);
  EXPECT_TRUE(
      torch::allclose(NystromLandmarks(x, mask, 2),
                      torch::tensor({2.0, 3.0, 7.0, 8.0}, torch::kFloat64).view({1, 1, 2, 2})));
  EXPECT_TRUE(torch::allclose(NystromLandmarks(x, mask, 1), x.slice(2, 0, 5).mean(2, true)));
}

TEST(IterativePseudoInverse, SatisfiesThePenroseConditionsOnRowStochasticMatrices) {
  torch::manual_seed(1);
  const torch::Tensor a = torch::softmax(torch::randn({2, 3, 8, 8}, torch::kFloat64), -1);
  const torch::Tensor z = IterativePseudoInverse(a, 30);
  const torch::Tensor az = torch::matmul(a, z), za = torch::matmul(z, a);
  EXPECT_LT(MaxAbs(torch::matmul(az, a) - a), 1e-4);
  EXPECT_LT(MaxAbs(torch::matmul(za, z) - z), 1e-4);
  EXPECT_LT(MaxAbs(az - az.transpose(-2, -1)), 1e-4);
  EXPECT_LT(MaxAbs(za - za.transpose(-2, -1)), 1e-4);
  EXPECT_LT(MaxAbs(z - torch::linalg_pinv(a)), 1e-4);
  // Each matrix is inverted on its own: the batch does not change any result.
  EXPECT_TRUE(torch::allclose(IterativePseudoInverse(a[1][2], 30), z[1][2], 1e-12, 1e-12));
}

TEST(IterativePseudoInverse, DrivesAZToTheIdentityOnAnInvertibleMatrix) {
  torch::manual_seed(2);
  const torch::Tensor a =
      2 * torch::eye(6, torch::kFloat64) + 0.3 * torch::randn({6, 6}, torch::kFloat64);
  const torch::Tensor identity = torch::eye(6, torch::kFloat64);
  const auto error = [&](int64_t iterations) {
    return MaxAbs(torch::matmul(a, IterativePseudoInverse(a, iterations)) - identity);
  };
  // Z_0 = A^T / (||A||_1 ||A||_inf) satisfies ||I - A Z_0||_2 < 1, so the iteration converges.
  EXPECT_LT(torch::linalg_svdvals(identity - torch::matmul(a, IterativePseudoInverse(a, 0)))
                .max()
                .item<double>(),
            1.0);
  EXPECT_LT(error(2), error(1));
  EXPECT_LT(error(4), error(2));
  EXPECT_LT(error(20), 1e-10);
  EXPECT_THROW(IterativePseudoInverse(torch::ones({2, 3}), 6), c10::Error);
}

// Q = K with well-separated rows gives a well-conditioned m x m kernel.
TEST(NystromAttention, WithALandmarkPerRowEqualsSoftmaxToPseudoInverseAccuracy) {
  torch::manual_seed(3);
  const torch::Tensor x = torch::randn({2, 2, 8, 16}, torch::kFloat64);
  const torch::Tensor v = torch::randn({2, 2, 8, 3}, torch::kFloat64);
  const torch::Tensor mask = testing::LengthMask({8, 5}, 8);
  const torch::Tensor expected = testing::NaiveSoftmaxAttention(x, x, v, mask, 0.25);
  for (const int64_t landmarks : {8, 12}) {
    NystromAttention attention(NystromOptions(landmarks, /*iterations=*/40));
    const torch::Tensor out = attention.forward(x, x, v, mask);
    EXPECT_LT(MaxAbs(out[0] - expected[0]), 1e-6) << landmarks << " landmarks";
    EXPECT_LT(MaxAbs(out[1].slice(1, 0, 5) - expected[1].slice(1, 0, 5)), 1e-6)
        << landmarks << " landmarks, padded";
  }
  // The default 6 iterations are only approximate, but close on this easy kernel.
  EXPECT_LT(MaxAbs(NystromAttention(NystromOptions(8, 6)).forward(x, x, v, {}) -
                   testing::NaiveSoftmaxAttention(x, x, v, {}, 0.25)),
            0.1);
}

TEST(NystromAttention, ConstantValuesGiveTheConstantWhenThePseudoInverseConverges) {
  torch::manual_seed(4);
  NystromAttention attention(NystromOptions(/*landmarks=*/3, /*iterations=*/40));
  const torch::Tensor q = torch::randn({1, 2, 10, 16}, torch::kFloat64);
  const torch::Tensor k = torch::randn({1, 2, 10, 16}, torch::kFloat64);
  const torch::Tensor out =
      attention.forward(q, k, torch::full({1, 2, 10, 3}, 2.5, torch::kFloat64), {});
  EXPECT_LT(MaxAbs(out - 2.5), 1e-6);
}

TEST(NystromAttention, PaddingIsInvisibleAndBatchEqualsSingle) {
  torch::manual_seed(5);
  NystromAttention attention(NystromOptions(/*landmarks=*/3, /*iterations=*/6));
  testing::ExpectPaddingInvisibleAndBatchEqualsSingle(attention, /*head_dim=*/16);
}

TEST(NystromAttention, RunsInFloat32AndRejectsInvalidOptions) {
  torch::manual_seed(6);
  const torch::Tensor q = torch::randn({1, 2, 9, 16}), v = torch::randn({1, 2, 9, 3});
  const torch::Tensor out = NystromAttention(NystromOptions(4, 6)).forward(q, q, v, {});
  EXPECT_EQ(out.scalar_type(), torch::kFloat32);
  EXPECT_LT(
      MaxAbs(out.to(torch::kFloat64) -
             NystromAttention(NystromOptions(4, 6))
                 .forward(q.to(torch::kFloat64), q.to(torch::kFloat64), v.to(torch::kFloat64), {})),
      1e-4);
  EXPECT_THROW(NystromAttention(NystromOptions(0, 6)), c10::Error);
  EXPECT_THROW(NystromAttention(NystromOptions(4, -1)), c10::Error);
}

}  // namespace
}  // namespace vidclf::model::attention
