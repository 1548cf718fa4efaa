#include "model/attention/softmax_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/model/attention/reference.h"

namespace vidclf::model::attention {
namespace {

using testing::MaxAbsDiff;

using testing::LengthMask;
using testing::NaiveSoftmaxAttention;

SoftmaxAttention MakeSoftmax(int64_t head_dim, bool causal = false, double scale = 0) {
  AttentionOptions options;
  options.head_dim = head_dim;
  options.causal = causal;
  options.scale = scale;
  return SoftmaxAttention(options);
}

TEST(SoftmaxAttention, EqualsNaiveSoftmaxAttention) {
  torch::manual_seed(1);
  const auto f64 = torch::kDouble;
  const torch::Tensor q = torch::randn({2, 3, 5, 4}, f64), k = torch::randn({2, 3, 7, 4}, f64);
  const torch::Tensor v = torch::randn({2, 3, 7, 6}, f64);
  const torch::Tensor mask = LengthMask({7, 4}, 7);
  EXPECT_LE(
      MaxAbsDiff(MakeSoftmax(4).forward(q, k, v, mask), NaiveSoftmaxAttention(q, k, v, mask, 0.5)),
      1e-10);
  EXPECT_LE(MaxAbsDiff(MakeSoftmax(4, false, 0.3).forward(q, k, v, torch::Tensor()),
                       NaiveSoftmaxAttention(q, k, v, torch::Tensor(), 0.3)),
            1e-10);
  const torch::Tensor causal_k = k.slice(2, 0, 5), causal_v = v.slice(2, 0, 5);
  const torch::Tensor causal_mask = LengthMask({5, 3}, 5);
  EXPECT_LE(MaxAbsDiff(MakeSoftmax(4, true).forward(q, causal_k, causal_v, causal_mask),
                       NaiveSoftmaxAttention(q, causal_k, causal_v, causal_mask, 0.5, true)),
            1e-10);
  // float32 against the float64 reference.
  const torch::Tensor out32 =
      MakeSoftmax(4).forward(q.to(torch::kFloat), k.to(torch::kFloat), v.to(torch::kFloat), mask);
  EXPECT_EQ(out32.scalar_type(), torch::kFloat);
  EXPECT_TRUE(
      torch::allclose(out32.to(f64), NaiveSoftmaxAttention(q, k, v, mask, 0.5), 1e-5, 1e-6));
}

TEST(SoftmaxAttention, EqualAndExtremeLogitsGiveNoNaN) {
  torch::manual_seed(2);
  const torch::Tensor k = torch::randn({1, 2, 6, 4}), v = torch::randn({1, 2, 6, 3});
  // Zero queries: every logit in a row is equal, so each output is the mean value row.
  const torch::Tensor equal =
      MakeSoftmax(4).forward(torch::zeros({1, 2, 5, 4}), k, v, torch::Tensor());
  EXPECT_TRUE(torch::allclose(equal, v.mean(2, true).expand({1, 2, 5, 3}), 1e-5, 1e-6));
  // Logits around +-1e4 would overflow exp() without the max subtraction.
  const torch::Tensor q = 1e4 * torch::randn({1, 2, 5, 4});
  const torch::Tensor extreme = MakeSoftmax(4, false, 1.0).forward(q, k, v, LengthMask({4}, 6));
  EXPECT_TRUE(torch::isfinite(extreme).all().item<bool>());
  EXPECT_TRUE(torch::isfinite(MakeSoftmax(4, false, 1.0).forward(-q, k, v, torch::Tensor()))
                  .all()
                  .item<bool>());
}

TEST(SoftmaxAttention, AddingAConstantToALogitRowChangesNothing) {
  torch::manual_seed(3);
  const auto f64 = torch::kDouble;
  const torch::Tensor q = torch::randn({2, 2, 5, 4}, f64), k = torch::randn({2, 2, 6, 4}, f64);
  const torch::Tensor v = torch::randn({2, 2, 6, 3}, f64);
  // An extra width with q = c_i / scale and k = 1 adds c_i to every logit of row i.
  const double scale = 0.7;
  const torch::Tensor shift = 50 * torch::randn({2, 2, 5, 1}, f64) / scale;
  const torch::Tensor shifted =
      MakeSoftmax(5, false, scale)
          .forward(torch::cat({q, shift}, -1), torch::cat({k, torch::ones({2, 2, 6, 1}, f64)}, -1),
                   v, LengthMask({6, 2}, 6));
  EXPECT_LE(
      MaxAbsDiff(shifted, MakeSoftmax(4, false, scale).forward(q, k, v, LengthMask({6, 2}, 6))),
      1e-10);
}

TEST(SoftmaxAttention, ConstantValuesComeBackUnchanged) {
  torch::manual_seed(4);
  const torch::Tensor out =
      MakeSoftmax(4, true).forward(torch::randn({2, 2, 6, 4}), torch::randn({2, 2, 6, 4}),
                                   torch::full({2, 2, 6, 3}, 2.5), LengthMask({6, 3}, 6));
  EXPECT_TRUE(torch::allclose(out, torch::full({2, 2, 6, 3}, 2.5), 1e-6, 1e-6));
}

TEST(SoftmaxAttention, PaddedKeysNeverChangeValidOutputs) {
  torch::manual_seed(5);
  for (const bool causal : {false, true}) {
    const torch::Tensor q = torch::randn({1, 2, 9, 4}, torch::kDouble);
    const torch::Tensor k = torch::randn({1, 2, 5, 4}, torch::kDouble);
    const torch::Tensor v = torch::randn({1, 2, 5, 3}, torch::kDouble);
    const torch::Tensor garbage_k = torch::full({1, 2, 4, 4}, std::nan(""), torch::kDouble);
    const torch::Tensor garbage_v =
        torch::full({1, 2, 4, 3}, std::numeric_limits<double>::infinity(), torch::kDouble);
    SoftmaxAttention attention = MakeSoftmax(4, causal);
    // Causal needs L == S: compare the first 5 query rows, which see no padded key either way.
    const torch::Tensor alone = attention.forward(q.slice(2, 0, 5), k, v, torch::Tensor());
    const torch::Tensor padded = attention.forward(
        q, torch::cat({k, garbage_k}, 2), torch::cat({v, garbage_v}, 2), LengthMask({5}, 9));
    EXPECT_LE(MaxAbsDiff(alone, padded.slice(2, 0, 5)), 1e-12) << "causal " << causal;
    EXPECT_TRUE(torch::isfinite(padded).all().item<bool>()) << "causal " << causal;
  }
}

TEST(SoftmaxAttention, RowsWithoutAnyRealKeyAreZeroWithFiniteGradients) {
  torch::manual_seed(6);
  const torch::Tensor q = torch::randn({2, 2, 4, 4}, torch::requires_grad());
  const torch::Tensor k = torch::randn({2, 2, 4, 4}, torch::requires_grad());
  const torch::Tensor v = torch::randn({2, 2, 4, 3}, torch::requires_grad());
  // Sequence 1 is all padding; under the causal mask, left padding leaves row 0 of sequence 0 with
  // no visible key either.
  const torch::Tensor mask =
      torch::tensor({{false, true, true, true}, {false, false, false, false}});
  const torch::Tensor out = MakeSoftmax(4, true).forward(q, k, v, mask);
  EXPECT_TRUE(torch::allclose(out[1], torch::zeros({2, 4, 3})));
  EXPECT_TRUE(torch::allclose(out[0].select(1, 0), torch::zeros({2, 3})));
  out.sum().backward();
  for (const torch::Tensor& t : {q, k, v})
    EXPECT_TRUE(torch::isfinite(t.grad()).all().item<bool>());
}

TEST(SoftmaxAttention, BatchEqualsSingleSequences) {
  torch::manual_seed(7);
  const torch::Tensor q = torch::randn({3, 2, 6, 4}), k = torch::randn({3, 2, 6, 4});
  const torch::Tensor v = torch::randn({3, 2, 6, 5});
  const torch::Tensor mask = LengthMask({6, 2, 4}, 6);
  SoftmaxAttention attention = MakeSoftmax(4);
  const torch::Tensor together = attention.forward(q, k, v, mask);
  for (int64_t b = 0; b < 3; ++b) {
    const torch::Tensor single = attention.forward(q.slice(0, b, b + 1), k.slice(0, b, b + 1),
                                                   v.slice(0, b, b + 1), mask.slice(0, b, b + 1));
    EXPECT_TRUE(torch::allclose(single, together.slice(0, b, b + 1), 1e-5, 1e-6)) << "row " << b;
  }
}

TEST(SoftmaxAttention, RejectsBadOptionsAndShapes) {
  EXPECT_THROW(MakeSoftmax(0), c10::Error);
  EXPECT_THROW(MakeSoftmax(4, false, -1.0), c10::Error);
  EXPECT_THROW(MakeSoftmax(4).forward(torch::randn({1, 1, 3, 4}), torch::randn({1, 1, 3, 5}),
                                      torch::randn({1, 1, 3, 2}), torch::Tensor()),
               c10::Error);
}

}  // namespace
}  // namespace vidclf::model::attention
