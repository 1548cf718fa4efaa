// Improved clustered attention, "i-clustered" (Vyas, Katharopoulos and Fleuret 2020; Katharopoulos
// thesis, section 5.3.3).
//
// Starts as clustered attention (clustered_attention.h): clusters, centroids Q^c and the centroid
// attention A^c [C', S]. Then, per cluster j, T_j = the k = min(topk, S) keys with the
// largest A^c_j (real keys only; when a sequence has fewer than k real keys, T_j is all of them),
// with mass m_j = sum_{l in T_j} A^c_jl. Query i of cluster j attends with
//   A^t_il = m_j * exp(s_il) / sum_{r in T_j} exp(s_ir)   for l in T_j, s_il = scale * Q_i . K_l,
//   A^t_il = A^c_jl                                       otherwise,
// so every row sums to 1, and out_i = V^t_i + V^b_j with V^t_i = sum_{l in T_j} A^t_il V_l (per
// query, O(k (E + M))) and V^b_j = sum_{l not in T_j} A^c_jl V_l (once per cluster).
// With k >= the number of real keys, m_j = 1 and the result is exactly softmax attention for any
// clustering. Proposition 2: ||A^t_i - A_i||_1 <= ||A^c_j - A_i||_1, never worse than clustered.
//
// Cost per (batch, head): clustered's, plus O(C S log k) for the top-k and O(L k (E + M)) for the
// exact part; nothing L x S is ever built. Without gradients on the CPU the exact part is a loop
// over queries reading per-cluster copies of the top keys and values; otherwise (training, GPUs)
// it gathers each query's k keys and values as tensors.
//
// Options read: those of clustered attention (head_dim/scale, clusters, hash_bits,
// lloyd_iterations, seed) and topk (k >= 1; thesis default 32). Departures from the seed: as for
// clustered attention (clustering.h); the seed's formula omits the scale "for clarity", here the
// scores are scaled like every other mechanism's.
#ifndef VIDCLF_MODEL_ATTENTION_IMPROVED_CLUSTERED_ATTENTION_H_
#define VIDCLF_MODEL_ATTENTION_IMPROVED_CLUSTERED_ATTENTION_H_

#include "model/attention/attention.h"
#include "model/attention/attention_spec.h"

namespace vidclf::model::attention {

inline constexpr AttentionParameter kTopk{"topk", 32, "keys per cluster computed exactly", 8};

class ImprovedClusteredAttention : public AttentionMechanism {
 public:
  // Throws c10::Error on invalid clustering options or topk < 1.
  explicit ImprovedClusteredAttention(const AttentionOptions& options);
  torch::Tensor forward(const torch::Tensor& queries, const torch::Tensor& keys,
                        const torch::Tensor& values,
                        const torch::Tensor& key_padding_mask) override;

 private:
  AttentionOptions options_;
};

// "improved-clustered" as the registry lists it.
const AttentionSpec& ImprovedClusteredAttentionSpec();

}  // namespace vidclf::model::attention

#endif  // VIDCLF_MODEL_ATTENTION_IMPROVED_CLUSTERED_ATTENTION_H_
