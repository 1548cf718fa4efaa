#include "model/attention/cosformer_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "tests/model/attention/reference.h"

namespace vidclf::model::attention {
namespace {

using testing::MaxAbsDiff;

using testing::LengthMask;
using testing::NaiveNormalizedAttention;

constexpr double kPi = 3.14159265358979323846;

CosformerAttention MakeCosformer(int64_t alpha, bool causal = false) {
  AttentionOptions options;
  options.max_length = alpha;
  options.causal = causal;
  return CosformerAttention(options);
}

// The explicit O(n^2) form: w_ij = relu(Q_i) . relu(K_j) cos(pi (i - j) / 2 alpha), row-normalised.
torch::Tensor Quadratic(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const torch::Tensor& mask, int64_t alpha, bool causal) {
  const torch::Tensor i = torch::arange(q.size(2), torch::kDouble).view({-1, 1});
  const torch::Tensor j = torch::arange(k.size(2), torch::kDouble).view({1, -1});
  const torch::Tensor cos = torch::cos(kPi * (i - j) / (2.0 * alpha)).to(q.scalar_type());
  const torch::Tensor w = torch::matmul(torch::relu(q), torch::relu(k).transpose(-2, -1)) * cos;
  return NaiveNormalizedAttention(w, v, mask, AttentionOptions{}.epsilon, causal);
}

TEST(CosformerAttention, EqualsItsQuadraticForm) {
  torch::manual_seed(31);
  const auto f64 = torch::kDouble;
  // Non-causal with L != S and padding.
  const torch::Tensor q = torch::randn({2, 2, 6, 4}, f64), k = torch::randn({2, 2, 9, 4}, f64);
  const torch::Tensor v = torch::randn({2, 2, 9, 5}, f64);
  const torch::Tensor mask = LengthMask({9, 4}, 9);
  const torch::Tensor expected = Quadratic(q, k, v, mask, 12, false);
  EXPECT_LE(MaxAbsDiff(MakeCosformer(12).forward(q, k, v, mask), expected), 1e-10);
  const torch::Tensor out32 = MakeCosformer(12).forward(q.to(torch::kFloat), k.to(torch::kFloat),
                                                        v.to(torch::kFloat), mask);
  EXPECT_TRUE(torch::allclose(out32.to(f64), expected, 1e-5, 1e-6));
}

TEST(CosformerAttention, CausalEqualsItsMaskedQuadraticForm) {
  torch::manual_seed(32);
  const auto f64 = torch::kDouble;
  const torch::Tensor q = torch::randn({2, 2, 77, 4}, f64), k = torch::randn({2, 2, 77, 4}, f64);
  const torch::Tensor v = torch::randn({2, 2, 77, 3}, f64);
  const torch::Tensor mask = LengthMask({77, 40}, 77);
  EXPECT_LE(MaxAbsDiff(MakeCosformer(80, true).forward(q, k, v, mask),
                       Quadratic(q, k, v, mask, 80, true)),
            1e-10);
}

TEST(CosformerAttention, OutputsLieWithinTheColumnRangeOfValues) {
  torch::manual_seed(33);
  for (const bool causal : {false, true}) {
    const torch::Tensor q = torch::randn({2, 2, 16, 4}), k = torch::randn({2, 2, 16, 4});
    const torch::Tensor v = torch::randn({2, 2, 16, 3});
    // alpha == n, the smallest alpha allowed: the largest |i - j| still has cos > 0.
    const torch::Tensor out = MakeCosformer(16, causal).forward(q, k, v, torch::Tensor());
    const torch::Tensor low = std::get<0>(v.min(2, true)), high = std::get<0>(v.max(2, true));
    EXPECT_TRUE((out >= low - 1e-5).all().item<bool>()) << "causal " << causal;
    EXPECT_TRUE((out <= high + 1e-5).all().item<bool>()) << "causal " << causal;
  }
}

TEST(CosformerAttention, ZeroReluQueryRowGivesAFiniteZeroOutput) {
  torch::manual_seed(34);
  const torch::Tensor q = torch::randn({1, 1, 5, 4}).index_put_({0, 0, 2}, -torch::ones({4}));
  for (const bool causal : {false, true}) {
    const torch::Tensor out = MakeCosformer(8, causal).forward(
        q, torch::randn({1, 1, 5, 4}), torch::randn({1, 1, 5, 3}), torch::Tensor());
    EXPECT_TRUE(torch::isfinite(out).all().item<bool>());
    EXPECT_TRUE(torch::allclose(out[0][0][2], torch::zeros({3})));
  }
}

TEST(CosformerAttention, PaddedKeysNeverChangeValidOutputs) {
  torch::manual_seed(35);
  const torch::Tensor q = torch::randn({1, 2, 5, 4}, torch::kDouble);
  const torch::Tensor k = torch::randn({1, 2, 5, 4}, torch::kDouble);
  const torch::Tensor v = torch::randn({1, 2, 5, 3}, torch::kDouble);
  const torch::Tensor padded = MakeCosformer(9).forward(
      q, torch::cat({k, 1e3 * torch::randn({1, 2, 4, 4}, torch::kDouble)}, 2),
      torch::cat({v, 1e3 * torch::randn({1, 2, 4, 3}, torch::kDouble)}, 2), LengthMask({5}, 9));
  EXPECT_LE(MaxAbsDiff(padded, MakeCosformer(9).forward(q, k, v, torch::Tensor())), 1e-12);
}

TEST(CosformerAttention, RejectsSequencesLongerThanAlpha) {
  try {
    MakeCosformer(8).forward(torch::randn({1, 1, 9, 4}), torch::randn({1, 1, 9, 4}),
                             torch::randn({1, 1, 9, 2}), torch::Tensor());
    ADD_FAILURE() << "expected c10::Error";
  } catch (const c10::Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("length 9"), std::string::npos) << message;
    EXPECT_NE(message.find("= 8"), std::string::npos) << message;
  }
  EXPECT_THROW(MakeCosformer(0), c10::Error);
}

}  // namespace
}  // namespace vidclf::model::attention
