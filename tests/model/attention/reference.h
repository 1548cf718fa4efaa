// Explicit O(n^2) references the attention mechanisms are checked against.
#ifndef VIDCLF_TESTS_UNIT_ATTENTION_REFERENCE_H_
#define VIDCLF_TESTS_UNIT_ATTENTION_REFERENCE_H_

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "model/attention/attention.h"

namespace vidclf::model::attention::testing {

// softmax(scale * Q K^T) V with padded keys (mask false) given -inf before the softmax and, when
// `causal`, keys j > i as well. Shapes as in attention.h. Computed in the inputs' dtype; pass
// float64 tensors for tight comparisons.
inline torch::Tensor NaiveSoftmaxAttention(const torch::Tensor& q, const torch::Tensor& k,
                                           const torch::Tensor& v, const torch::Tensor& mask,
                                           double scale, bool causal = false) {
  torch::Tensor scores = torch::matmul(q, k.transpose(-2, -1)) * scale;  // [B, H, L, S]
  if (mask.defined()) {
    scores = scores.masked_fill(mask.logical_not().view({mask.size(0), 1, 1, mask.size(1)}),
                                -std::numeric_limits<double>::infinity());
  }
  if (causal) {
    const torch::Tensor future =
        torch::ones({q.size(2), k.size(2)}, torch::kBool).triu(/*diagonal=*/1);
    scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
  }
  return torch::matmul(torch::softmax(scores, -1), v);
}

// Largest absolute entry of x, and of a - b.
inline double MaxAbs(const torch::Tensor& x) { return x.abs().max().item<double>(); }
inline double MaxAbsDiff(const torch::Tensor& a, const torch::Tensor& b) { return MaxAbs(a - b); }

// A bool key-padding mask [B, S] whose row b is true for the first lengths[b] positions.
inline torch::Tensor LengthMask(const std::vector<int64_t>& lengths, int64_t max_length) {
  torch::Tensor mask =
      torch::zeros({static_cast<int64_t>(lengths.size()), max_length}, torch::kBool);
  for (size_t b = 0; b < lengths.size(); ++b) mask[b].slice(0, 0, lengths[b]).fill_(true);
  return mask;
}

// sum_j w_ij V_j / (sum_j w_ij + epsilon) from explicit weights w [B, H, L, S], after padded keys
// (mask false) and, when `causal`, keys j > i get weight 0: the quadratic reference of the
// kernelised mechanisms (linear, causal-linear, cosformer). Padded values must be finite.
inline torch::Tensor NaiveNormalizedAttention(const torch::Tensor& w, const torch::Tensor& v,
                                              const torch::Tensor& mask, double epsilon,
                                              bool causal = false) {
  torch::Tensor weights = w;
  if (mask.defined()) {
    weights = weights.masked_fill(mask.logical_not().view({mask.size(0), 1, 1, mask.size(1)}), 0);
  }
  if (causal) {
    weights = weights.masked_fill(
        torch::ones({w.size(2), w.size(3)}, torch::kBool).triu(/*diagonal=*/1), 0);
  }
  return torch::matmul(weights, v) / (weights.sum(-1, /*keepdim=*/true) + epsilon);
}

// Self-attention inputs of three sequences (lengths 7, 4, 2) whose padding holds large garbage:
// checks that each sequence alone gives its rows of the batched output (padding is invisible) and
// that each batch row run alone gives the same (batch equals single), within `tolerance`.
inline void ExpectPaddingInvisibleAndBatchEqualsSingle(AttentionMechanism& attention,
                                                       int64_t head_dim, double tolerance = 1e-10) {
  torch::NoGradGuard no_grad;
  const std::vector<int64_t> lengths = {7, 4, 2};
  const torch::Tensor mask = LengthMask(lengths, 7);
  const torch::Tensor pad = mask.logical_not().view({3, 1, 7, 1}).to(torch::kFloat64) * 1e3;
  const torch::Tensor q = torch::randn({3, 2, 7, head_dim}, torch::kFloat64) * (1 + pad);
  const torch::Tensor k = torch::randn({3, 2, 7, head_dim}, torch::kFloat64) * (1 + pad);
  const torch::Tensor v = torch::randn({3, 2, 7, 3}, torch::kFloat64) * (1 + pad);
  const torch::Tensor batched = attention.forward(q, k, v, mask);
  EXPECT_TRUE(torch::isfinite(batched).all().item<bool>());
  for (int64_t b = 0; b < 3; ++b) {
    const auto row = [&](const torch::Tensor& x) { return x.slice(0, b, b + 1); };
    const auto real = [&](const torch::Tensor& x) { return row(x).slice(2, 0, lengths[b]); };
    EXPECT_TRUE(torch::allclose(attention.forward(real(q), real(k), real(v), {}), real(batched),
                                tolerance, tolerance))
        << "padding changed sequence " << b;
    EXPECT_TRUE(torch::allclose(real(attention.forward(row(q), row(k), row(v), row(mask))),
                                real(batched), tolerance, tolerance))
        << "batch changed sequence " << b;
  }
}

}  // namespace vidclf::model::attention::testing

#endif  // VIDCLF_TESTS_UNIT_ATTENTION_REFERENCE_H_
