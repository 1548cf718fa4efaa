// "causal-linear": linear attention in which position i sees keys j <= i only (Katharopoulos et
// al., eq. 4.9-4.12), phi(x) = elu(x) + 1:
//
//   out_i = phi(Q_i)^T S_i / (phi(Q_i)^T Z_i + epsilon),
//   S_i = sum_{j<=i} phi(K_j) V_j^T,  Z_i = sum_{j<=i} phi(K_j).
//
// Requires L == S. Reads options.epsilon; always causal (options.causal is not read) and unscaled
// like "linear" (options.scale is ignored). Padded keys get phi(K_j) = 0 and V_j = 0.
//
// The prefix sums are computed blockwise rather than with one cumsum over the [L, E, M] outer
// products (which would hold L * E * M numbers per head): the sequence is cut into blocks of
// kCausalLinearBlock positions; inside a block the j <= i weights are an explicit block x block
// matrix, and (S, Z) carried from the previous blocks add the rest. Time O(L * (block * (E + M) +
// E * M)), memory O(L * (block + M) + E * M) per head; the result equals the cumsum form up to
// rounding. The same code serves live streams: forward_chunk() takes (S, Z) from the previous chunk
// and returns them updated, so chunks of any size concatenate to the full-sequence result and the
// state is [B, H, E, M] + [B, H, E] whatever the length seen. Gradients come from autograd (the
// thesis's custom backward, its App. C.1, is not implemented); autograd keeps one state per block.
#ifndef VIDCLF_MODEL_ATTENTION_CAUSAL_LINEAR_ATTENTION_H_
#define VIDCLF_MODEL_ATTENTION_CAUSAL_LINEAR_ATTENTION_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "model/attention/attention.h"
#include "model/attention/attention_spec.h"

namespace vidclf::model::attention {

// Positions per block of the blockwise prefix sums: block x block weights against E x M state
// updates balance the two costs for head widths around 64.
inline constexpr int64_t kCausalLinearBlock = 64;

// Causal normalised kernel attention from already-mapped features phi_q, phi_k [B, H, T, D] (>= 0,
// padded rows already zero) and values [B, H, T, M], continuing from `state` (of the same B, H, D
// and M; undefined for a fresh start). Returns the output [B, H, T, M] and the state after the
// chunk. Shared with causal cosFormer.
std::pair<torch::Tensor, AttentionState> CausalLinearAttentionFromFeatures(
    const torch::Tensor& phi_q, const torch::Tensor& phi_k, const torch::Tensor& values,
    double epsilon, const AttentionState& state);

class CausalLinearAttention : public AttentionMechanism {
 public:
  // Throws c10::Error unless epsilon is finite and > 0.
  explicit CausalLinearAttention(const AttentionOptions& options);

  torch::Tensor forward(const torch::Tensor& queries, const torch::Tensor& keys,
                        const torch::Tensor& values,
                        const torch::Tensor& key_padding_mask) override;

  // The state is (S, Z) above. Throws c10::Error if B, H, E or M differ from the state's.
  bool has_recurrent_form() const override { return true; }
  std::pair<torch::Tensor, AttentionState> forward_chunk(const torch::Tensor& q,
                                                         const torch::Tensor& k,
                                                         const torch::Tensor& v,
                                                         const AttentionState& state) override;

  // Float32 on the CPU; states[b] is (S [1, H, E, M], Z [1, H, E]). Written out, it reads each
  // state once and writes the next once; joining the states, adding and splitting them with
  // tensor operations copied them three times.
  bool has_one_frame_step() const override { return true; }
  std::pair<torch::Tensor, std::vector<AttentionState>> forward_one_frame_each(
      const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
      const std::vector<AttentionState>& states) const override;

 private:
  AttentionOptions options_;
};

// "causal-linear" as the registry lists it.
const AttentionSpec& CausalLinearAttentionSpec();

}  // namespace vidclf::model::attention

#endif  // VIDCLF_MODEL_ATTENTION_CAUSAL_LINEAR_ATTENTION_H_
