// "linear": kernelised attention with the feature map phi(x) = elu(x) + 1 (Katharopoulos et al.,
// eq. 4.5-4.7):
//
//   out_i = phi(Q_i)^T (sum_j phi(K_j) V_j^T) / (phi(Q_i)^T (sum_j phi(K_j)) + epsilon)
//
// Both sums are computed once and shared by every query: O((L + S) * E * M) time and O(E * M)
// extra memory per head; no L x S matrix is built. Reads options.epsilon and options.causal. There
// is no score scale, as in the thesis formula (phi, not a softmax temperature, shapes the
// weights); options.scale is ignored. epsilon, absent from the thesis, keeps a row finite when
// every key is padded (the output is then 0). Padded keys get phi(K_j) = 0 and V_j = 0.
// Non-causal only: options.causal = true is refused (use "causal-linear").
#ifndef VIDCLF_MODEL_ATTENTION_LINEAR_ATTENTION_H_
#define VIDCLF_MODEL_ATTENTION_LINEAR_ATTENTION_H_

#include "model/attention/attention.h"
#include "model/attention/attention_spec.h"

namespace vidclf::model::attention {

// phi(x) = elu(x) + 1: positive everywhere, and with a non-zero gradient for x < 0 (unlike relu).
torch::Tensor EluFeatureMap(const torch::Tensor& x);

// x [B, H, S, D] with the rows of padded keys (key_padding_mask [B, S] false) set to 0; x itself
// when the mask is undefined. masked_fill rather than a product, so inf/NaN padding is cleared too.
torch::Tensor ZeroPaddedKeys(const torch::Tensor& x, const torch::Tensor& key_padding_mask);

// Non-causal normalised kernel attention from already-mapped features: phi_q [B, H, L, D],
// phi_k [B, H, S, D] (>= 0, padded rows already zero), values [B, H, S, M] -> [B, H, L, M].
// Shared with cosFormer, whose features are [relu(x) cos, relu(x) sin].
torch::Tensor LinearAttentionFromFeatures(const torch::Tensor& phi_q, const torch::Tensor& phi_k,
                                          const torch::Tensor& values, double epsilon);

class LinearAttention : public AttentionMechanism {
 public:
  // Throws c10::Error unless epsilon is finite and > 0 and causal is false.
  explicit LinearAttention(const AttentionOptions& options);

  torch::Tensor forward(const torch::Tensor& queries, const torch::Tensor& keys,
                        const torch::Tensor& values,
                        const torch::Tensor& key_padding_mask) override;

 private:
  AttentionOptions options_;
};

// "linear" as the registry lists it.
const AttentionSpec& LinearAttentionSpec();

}  // namespace vidclf::model::attention

#endif  // VIDCLF_MODEL_ATTENTION_LINEAR_ATTENTION_H_
