// Clustered attention (Vyas, Katharopoulos and Fleuret 2020; Katharopoulos thesis, section 5.3.2).
//
// Per (batch, head) the queries are grouped into C' = min(C, L) clusters by hashing and Hamming
// K-means (clustering.h), each cluster j gets the centroid Q^c_j = mean of its real member queries
// (in the original space), and
//   A^c = softmax(scale * Q^c K^T)   [C', S], padded keys weigh zero,
//   out_i = (A^c V)_{c(i)}           every query receives its cluster's output.
// When a sequence has at most C real queries every query is its own cluster, so the result is
// exactly softmax attention.
//
// Cost per (batch, head): O(L E B) hashing, O(L C) popcounts per Lloyd iteration (on a CPU core,
// clustering.h), O(C S (E + M)) for the centroid attention and O(L M) to broadcast; nothing L x S
// is ever built.
//
// Options read: head_dim/scale (scale), clusters (C), hash_bits (B, 1..63), lloyd_iterations (L),
// seed (the random planes). Thesis defaults C = 100, B = 63, L = 10.
//
// Departures from the seed, see clustering.h: deterministic farthest-point initial centroids
// instead of random ones; planes drawn from options.seed on every call instead of fresh random
// ones; with self-attention shapes (L == S) the key-padding mask also marks padded queries, which
// are left out of the clustering so that padding never changes a real output.
#ifndef VIDCLF_MODEL_ATTENTION_CLUSTERED_ATTENTION_H_
#define VIDCLF_MODEL_ATTENTION_CLUSTERED_ATTENTION_H_

#include "model/attention/attention.h"
#include "model/attention/attention_spec.h"

namespace vidclf::model::attention {

class ClusteredAttention : public AttentionMechanism {
 public:
  // Throws c10::Error on invalid clustering options (see CheckClusteringOptions).
  explicit ClusteredAttention(const AttentionOptions& options);
  torch::Tensor forward(const torch::Tensor& queries, const torch::Tensor& keys,
                        const torch::Tensor& values,
                        const torch::Tensor& key_padding_mask) override;

 private:
  AttentionOptions options_;
};

// "clustered" as the registry lists it.
const AttentionSpec& ClusteredAttentionSpec();

}  // namespace vidclf::model::attention

#endif  // VIDCLF_MODEL_ATTENTION_CLUSTERED_ATTENTION_H_
