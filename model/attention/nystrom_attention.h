// Nystrom attention (Xiong et al. 2021; seed 000, eqs. 3.40-3.43).
//
// With m landmarks Q~ and K~ (segment means of the queries and of the keys):
//   F = softmax(scale * Q K~^T)   [L, m]
//   A = softmax(scale * Q~ K~^T)  [m, m]
//   B = softmax(scale * Q~ K^T)   [m, S], padded keys weigh zero
//   out = F (pinv(A) (B V)), computed right to left; nothing L x S is ever built.
// Cost per (batch, head): O((L + S) m (E + M) + m^2 M + iterations m^3), linear in the length.
//
// Options read: nystrom_landmarks (m >= 1), nystrom_pinv_iterations (>= 0; default 6, as the
// reference implementations use), head_dim/scale (scale).
//
// Landmarks (corrected from the seed): the seed prints Q~_j = sum of m rows / m; the reference
// code, used here, averages the l = n/m consecutive rows (j-1)l+1 .. jl. Details:
//   * Only real rows count: padded keys (mask false) are left out of the key landmarks and, with
//     self-attention shapes (L == S), padded queries out of the query landmarks, so padding never
//     changes a real output.
//   * With n real rows and m' = min(m, n_queries, n_keys) landmarks in use, the real row of rank r
//     (0-based, position order) goes to segment floor(r m' / n). When n is a multiple of m' these
//     are the l = n/m' consecutive rows of the reference; otherwise the segments are consecutive
//     runs of floor(n/m') or ceil(n/m') rows (no zero padding of the sequence, which would bias
//     the last mean).
//   * When m >= n (self-attention) every real key and query is its own landmark: K~ = K, Q~ = Q,
//     A = B and the output is softmax attention up to the pseudo-inverse's accuracy.
//   * Unused landmark slots (m' < m) are dropped from F by the mask and given identity rows and
//     columns in A, so pinv(A) is block diagonal and they contribute exactly nothing.
// Pseudo-inverse (corrected from the seed, which leaves Z_0 open): see IterativePseudoInverse.
// Its Z_0 scale is computed per matrix (the reference code takes one maximum over the whole batch)
// so that a sequence's output does not depend on the rest of its batch.
#ifndef VIDCLF_MODEL_ATTENTION_NYSTROM_ATTENTION_H_
#define VIDCLF_MODEL_ATTENTION_NYSTROM_ATTENTION_H_

#include <cstdint>

#include "model/attention/attention.h"
#include "model/attention/attention_spec.h"

namespace vidclf::model::attention {

inline constexpr AttentionParameter kNystromLandmarks{"nystrom_landmarks", 32, "landmarks m", 8};
inline constexpr AttentionParameter kNystromPinvIterations{"nystrom_pinv_iterations", 6,
                                                           "iterations of the pseudo-inverse"};

// Moore-Penrose pseudo-inverse of every matrix a[..., m, m] by the iteration of Razavi et al.
// (seed 000, Lemma 3.7):
//   Z_0 = A^T / (||A||_1 ||A||_inf),
//   Z_{j+1} = 1/4 Z_j (13 I - A Z_j (15 I - A Z_j (7 I - A Z_j))),
// with ||A||_1 the largest absolute column sum and ||A||_inf the largest absolute row sum of that
// matrix. Returns Z_iterations (Z_0 when iterations is 0). Throws c10::Error unless a is square in
// its last two dimensions and iterations >= 0.
torch::Tensor IterativePseudoInverse(const torch::Tensor& a, int64_t iterations);

// Segment-mean landmarks of x [B, H, N, D] with row mask [B, N] (undefined = all rows real): the
// real rows, in order, split into m' = min(landmarks, real rows) consecutive segments as described
// above, returned as [B, H, landmarks, D]; rows m' .. landmarks - 1 are zero.
torch::Tensor NystromLandmarks(const torch::Tensor& x, const torch::Tensor& mask,
                               int64_t landmarks);

class NystromAttention : public AttentionMechanism {
 public:
  // Throws c10::Error unless nystrom_landmarks >= 1 and nystrom_pinv_iterations >= 0.
  explicit NystromAttention(const AttentionOptions& options);
  torch::Tensor forward(const torch::Tensor& queries, const torch::Tensor& keys,
                        const torch::Tensor& values,
                        const torch::Tensor& key_padding_mask) override;

 private:
  AttentionOptions options_;
};

// "nystrom" as the registry lists it.
const AttentionSpec& NystromAttentionSpec();

}  // namespace vidclf::model::attention

#endif  // VIDCLF_MODEL_ATTENTION_NYSTROM_ATTENTION_H_
