// Linformer attention (Wang et al. 2020; seed 000, eqs. 3.25-3.27).
//
// Learned projections E, F in R^{k x n_max} shorten the keys and values along the sequence:
//   K' = E[:, :S] K,  V' = F[:, :S] V     (k x E and k x M),
//   out = softmax(scale * Q K'^T) V'       (L x k weights, each row sums to 1).
// Cost per (batch, head): O(k S (E + M)) for the projections and O(L k (E + M)) for the rest,
// linear in the sequence length; nothing L x S is ever built.
//
// Options read: linformer_k (k >= 1), max_length (n_max >= 1), head_dim/scale (scale).
//
// Choices the seed leaves open:
//   * E and F are parameters of this module ("key_projection" and "value_projection"), shared by
//     every head of the layer (the seed does not say; sharing across heads is the Linformer
//     paper's "headwise sharing"), initialised with i.i.d. N(0, 1/k) entries (the JL projection
//     of Thm 3.4). They are float32 by default and are cast to the inputs' dtype and device.
//   * Column j of E and F belongs to sequence position j. An input with S < n_max uses the first S
//     columns. "Padded and masked": a key j with key_padding_mask false has column j of E and F
//     replaced by zeros for that batch element, so K' and V' are sums over real keys only and a
//     padded key's contents never reach any output. The k projected keys themselves are never
//     masked (they are mixtures, and a zero mixture still takes part in the softmax, as it does for
//     an unpadded input shorter than n_max). Hence trailing padding is invisible: a sequence of n
//     real frames padded to any S <= n_max gives the same outputs as the n frames alone.
//   * S > n_max is rejected with c10::Error naming both lengths.
//   * With k = n = S and E = F = I (or the same permutation matrix) the result equals softmax
//     attention: softmax(X P^T) P V = softmax(X) V.
#ifndef VIDCLF_MODEL_ATTENTION_LINFORMER_ATTENTION_H_
#define VIDCLF_MODEL_ATTENTION_LINFORMER_ATTENTION_H_

#include "model/attention/attention.h"
#include "model/attention/attention_spec.h"

namespace vidclf::model::attention {

inline constexpr AttentionParameter kLinformerK{"linformer_k", 64,
                                                "projected length k of keys and values", 16};

class LinformerAttention : public AttentionMechanism {
 public:
  // Throws c10::Error unless linformer_k >= 1 and max_length >= 1.
  explicit LinformerAttention(const AttentionOptions& options);
  torch::Tensor forward(const torch::Tensor& queries, const torch::Tensor& keys,
                        const torch::Tensor& values,
                        const torch::Tensor& key_padding_mask) override;

  // E and F, [linformer_k, max_length], registered parameters. Tests and loaders may overwrite
  // them in place (under torch::NoGradGuard).
  torch::Tensor key_projection;
  torch::Tensor value_projection;

 private:
  AttentionOptions options_;
};

// "linformer" as the registry lists it.
const AttentionSpec& LinformerAttentionSpec();

}  // namespace vidclf::model::attention

#endif  // VIDCLF_MODEL_ATTENTION_LINFORMER_ATTENTION_H_
