#include "model/attention/linear_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/model/attention/reference.h"

namespace vidclf::model::attention {
namespace {

using testing::MaxAbsDiff;

using testing::LengthMask;
using testing::NaiveNormalizedAttention;

LinearAttention MakeLinear() { return LinearAttention(AttentionOptions{}); }

// (phi(Q) phi(K)^T row-normalised) V, built as the explicit L x S matrix.
torch::Tensor Quadratic(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const torch::Tensor& mask) {
  const torch::Tensor w = torch::matmul(torch::elu(q) + 1, (torch::elu(k) + 1).transpose(-2, -1));
  return NaiveNormalizedAttention(w, v, mask, AttentionOptions{}.epsilon);
}

TEST(LinearAttention, FeatureMapIsEluPlusOne) {
  const torch::Tensor x = torch::tensor({-3.0, -0.5, 0.0, 0.5, 2.0}, torch::kDouble);
  const torch::Tensor expected =
      torch::tensor({std::exp(-3.0), std::exp(-0.5), 1.0, 1.5, 3.0}, torch::kDouble);
  EXPECT_LE(MaxAbsDiff(EluFeatureMap(x), expected), 1e-15);
}

TEST(LinearAttention, EqualsItsQuadraticReference) {
  torch::manual_seed(11);
  const auto f64 = torch::kDouble;
  // M != E, L != S, one padded sequence.
  const torch::Tensor q = torch::randn({2, 3, 5, 4}, f64), k = torch::randn({2, 3, 7, 4}, f64);
  const torch::Tensor v = torch::randn({2, 3, 7, 6}, f64);
  const torch::Tensor mask = LengthMask({7, 3}, 7);
  const torch::Tensor out = MakeLinear().forward(q, k, v, mask);
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{2, 3, 5, 6}));
  EXPECT_LE(MaxAbsDiff(out, Quadratic(q, k, v, mask)), 1e-10);
  EXPECT_LE(MaxAbsDiff(MakeLinear().forward(q, k, v, torch::Tensor()),
                       Quadratic(q, k, v, torch::Tensor())),
            1e-10);
  const torch::Tensor out32 =
      MakeLinear().forward(q.to(torch::kFloat), k.to(torch::kFloat), v.to(torch::kFloat), mask);
  EXPECT_EQ(out32.scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::allclose(out32.to(f64), Quadratic(q, k, v, mask), 1e-5, 1e-6));
}

TEST(LinearAttention, PaddedKeysNeverChangeValidOutputs) {
  torch::manual_seed(12);
  const torch::Tensor q = torch::randn({1, 2, 5, 4}, torch::kDouble);
  const torch::Tensor k = torch::randn({1, 2, 5, 4}, torch::kDouble);
  const torch::Tensor v = torch::randn({1, 2, 5, 3}, torch::kDouble);
  const torch::Tensor padded = MakeLinear().forward(
      q, torch::cat({k, 1e3 * torch::randn({1, 2, 4, 4}, torch::kDouble)}, 2),
      torch::cat(
          {v, torch::full({1, 2, 4, 3}, std::numeric_limits<double>::quiet_NaN(), torch::kDouble)},
          2),
      LengthMask({5}, 9));
  EXPECT_LE(MaxAbsDiff(padded, MakeLinear().forward(q, k, v, torch::Tensor())), 1e-12);
  // No real key at all: zeros (epsilon keeps 0 / 0 away).
  const torch::Tensor none = MakeLinear().forward(q, k, v, LengthMask({0}, 5));
  EXPECT_TRUE(torch::allclose(none, torch::zeros_like(none)));
}

TEST(LinearAttention, BatchEqualsSingleSequences) {
  torch::manual_seed(13);
  const torch::Tensor q = torch::randn({3, 2, 6, 4}), k = torch::randn({3, 2, 6, 4});
  const torch::Tensor v = torch::randn({3, 2, 6, 5});
  const torch::Tensor mask = LengthMask({6, 2, 4}, 6);
  const torch::Tensor together = MakeLinear().forward(q, k, v, mask);
  for (int64_t b = 0; b < 3; ++b) {
    const torch::Tensor single = MakeLinear().forward(
        q.slice(0, b, b + 1), k.slice(0, b, b + 1), v.slice(0, b, b + 1), mask.slice(0, b, b + 1));
    EXPECT_TRUE(torch::allclose(single, together.slice(0, b, b + 1), 1e-5, 1e-6)) << "row " << b;
  }
}

TEST(LinearAttention, PermutationsActOnRowsAsExpected) {
  torch::manual_seed(14);
  const torch::Tensor q = torch::randn({2, 2, 6, 4}, torch::kDouble);
  const torch::Tensor k = torch::randn({2, 2, 8, 4}, torch::kDouble);
  const torch::Tensor v = torch::randn({2, 2, 8, 3}, torch::kDouble);
  const torch::Tensor out = MakeLinear().forward(q, k, v, torch::Tensor());
  const torch::Tensor key_order = torch::randperm(8), query_order = torch::randperm(6);
  // Permuting K and V rows together changes nothing; permuting Q permutes the output.
  EXPECT_LE(MaxAbsDiff(MakeLinear().forward(q, k.index_select(2, key_order),
                                            v.index_select(2, key_order), torch::Tensor()),
                       out),
            1e-12);
  EXPECT_LE(MaxAbsDiff(MakeLinear().forward(q.index_select(2, query_order), k, v, torch::Tensor()),
                       out.index_select(2, query_order)),
            1e-12);
}

TEST(LinearAttention, RejectsCausalAndBadEpsilon) {
  AttentionOptions causal;
  causal.causal = true;
  EXPECT_THROW(LinearAttention{causal}, c10::Error);
  AttentionOptions zero_epsilon;
  zero_epsilon.epsilon = 0;
  EXPECT_THROW(LinearAttention{zero_epsilon}, c10::Error);
}

}  // namespace
}  // namespace vidclf::model::attention
