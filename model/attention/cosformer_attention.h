// "cosformer": ReLU kernel attention re-weighted by position (Qin et al.; seed 000, eq. 3.4-3.9):
//
//   w_ij = relu(Q_i) . relu(K_j) * cos(pi * (i - j) / (2 * alpha)),
//   out_i = sum_j w_ij V_j / (sum_j w_ij + epsilon),
//
// with 0-based positions i along L and j along S, alpha = options.max_length, and j <= i only when
// options.causal. The Ptolemy split cos(a - b) = cos a cos b + sin a sin b makes w_ij a dot product
// of the features [relu(x) cos(pi p / 2 alpha), relu(x) sin(pi p / 2 alpha)] (width 2E), so the
// computation is linear attention on them: O((L + S) * E * M) time, no L x S matrix; the causal
// form uses the blockwise prefix sums of causal-linear. Inputs longer than alpha are refused:
// alpha >= length keeps |i - j| < alpha, so every weight is >= 0 and each output row is a weighted
// mean of value rows. epsilon (not in the thesis) keeps rows whose weights are all 0 (relu(Q_i) =
// 0, every key padded) finite; their output is 0. Reads options.max_length, options.causal and
// options.epsilon; options.scale is ignored (no score scale, as in the thesis).
#ifndef VIDCLF_MODEL_ATTENTION_COSFORMER_ATTENTION_H_
#define VIDCLF_MODEL_ATTENTION_COSFORMER_ATTENTION_H_

#include "model/attention/attention.h"
#include "model/attention/attention_spec.h"

namespace vidclf::model::attention {

class CosformerAttention : public AttentionMechanism {
 public:
  // Throws c10::Error unless max_length >= 1 and epsilon is finite and > 0.
  explicit CosformerAttention(const AttentionOptions& options);

  // Throws c10::Error if L or S exceeds max_length, or if causal and L != S.
  torch::Tensor forward(const torch::Tensor& queries, const torch::Tensor& keys,
                        const torch::Tensor& values,
                        const torch::Tensor& key_padding_mask) override;

 private:
  AttentionOptions options_;
};

// "cosformer" as the registry lists it.
const AttentionSpec& CosformerAttentionSpec();

}  // namespace vidclf::model::attention

#endif  // VIDCLF_MODEL_ATTENTION_COSFORMER_ATTENTION_H_
