// Floating-point operations of a transformer head's attention for one clip: the quantity of seed
// 000's FLOPs column (attention blocks only, at evaluation), counted from the shapes rather than
// measured, so that it is the same on every machine.
//
// Counted: the inner mechanism of every layer and head (a multiply-add is 2 FLOPs; exponentials,
// comparisons and the projections W_Q, W_K, W_V, W_O, which every mechanism shares, are not).
// With n tokens, E = d_model / heads per head, per layer and head:
//   softmax            4 n^2 E                       (Q K^T, then A V)
//   linear             4 n E^2 + 4 n E               (phi(K)^T V, phi(Q) (.), and the normaliser)
//   causal-linear      as linear (prefix sums instead of sums)
//   cosformer          twice linear (cos and sin reweighted halves)
//   linformer          4 k n E + 4 n k E             (E K, F V; then Q (EK)^T and A (FV))
//   nystrom            4 n m E + 2 m^2 E + 8 i m^3 + 2 m n E  (F, B, A; i pinv iterations of
//                      4 m x m products each; F (pinv(A) (B V)))
//   clustered          2 n B E + 2 L n C B + 4 C n E  (hashing, Lloyd, centroid attention)
//   improved-clustered clustered + 4 n k E           (the exact top-k part)
#ifndef VIDCLF_TRAIN_ATTENTION_COST_H_
#define VIDCLF_TRAIN_ATTENTION_COST_H_

#include <cstdint>

#include "model/model_config.h"

namespace vidclf::train {

// FLOPs of the attention of `config`'s transformer head over `frames` frames (plus the class
// token when it pools with one); 0 for a GRU head.
double AttentionFlopsPerClip(const model::ModelConfig& config, int64_t frames);

}  // namespace vidclf::train

#endif  // VIDCLF_TRAIN_ATTENTION_COST_H_
