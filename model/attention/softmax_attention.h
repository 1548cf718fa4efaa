// "softmax": exact scaled dot-product attention, out = softmax(scale * Q K^T + mask) V.
//
// Cost O(L * S * (E + M)) time and O(L * S) memory per head. Reads options.scale (0 means
// 1/sqrt(head_dim)), options.head_dim and options.causal (keys j > i are masked as well).
// Padded keys get -inf before the softmax. A query row whose keys are all masked (every key padded,
// or left padding under the causal mask) has no distribution to take; its output is defined as
// zeros rather than the NaN a plain softmax would give.
#ifndef VIDCLF_MODEL_ATTENTION_SOFTMAX_ATTENTION_H_
#define VIDCLF_MODEL_ATTENTION_SOFTMAX_ATTENTION_H_

#include "model/attention/attention.h"
#include "model/attention/attention_spec.h"

namespace vidclf::model::attention {

class SoftmaxAttention : public AttentionMechanism {
 public:
  // Throws c10::Error unless head_dim >= 1 and scale is finite and >= 0.
  explicit SoftmaxAttention(const AttentionOptions& options);

  torch::Tensor forward(const torch::Tensor& queries, const torch::Tensor& keys,
                        const torch::Tensor& values,
                        const torch::Tensor& key_padding_mask) override;

 private:
  AttentionOptions options_;
};

// "softmax" as the registry lists it.
const AttentionSpec& SoftmaxAttentionSpec();

}  // namespace vidclf::model::attention

#endif  // VIDCLF_MODEL_ATTENTION_SOFTMAX_ATTENTION_H_
