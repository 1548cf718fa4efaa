// Query clustering shared by the "clustered" and "improved-clustered" mechanisms (Vyas,
// Katharopoulos and Fleuret 2020; Katharopoulos thesis, section 5.3.2).
//
// Hashing: each query gets B = hash_bits bits, bit b = [q . r_b > 0], where the planes
// r_b ~ N(0, I) are drawn in float64 on the CPU by a torch::Generator seeded with options.seed and
// are shared by every batch element and head (fast-transformers shares them too). The same seed
// therefore always gives the same planes and clustering, on any device and in either dtype (a
// code can differ only where a projection rounds across zero).
// B <= 63 is kept from the seed (it is what fits an int64) so bundles stay portable. For queries
// on the CPU, the K-means below runs on codes packed one integer per query: Hamming distance is
// then one popcount, and no [L, C] distance matrix is ever built. For queries on CUDA it runs as
// batched tensor operations on the GPU (ClusterQueriesWithTensors), with the same result.
//
// Hamming K-means, per (batch, head), on the real queries only:
//   * C' = min(clusters, L) clusters; centroids are B-bit codes.
//   * Initialisation (the seed's code picks random queries; here, for determinism and padding
//     invariance, farthest-point): the first real query's code, then repeatedly the code of the
//     real query farthest in Hamming distance from the centroids chosen so far (ties to the lowest
//     position). Duplicate queries thus never crowd out distinct ones: with at most C' distinct
//     codes every code gets its own centroid (and the rest duplicate one and stay empty).
//   * L = lloyd_iterations Lloyd iterations, each: assign every query to its nearest
//     centroid (ties go to the lowest cluster index), then set each centroid bit by majority vote
//     of its real members; a tie, which includes an empty cluster, keeps the previous bit. Empty
//     clusters therefore keep their code and never produce NaN; then a final assignment.
//   * When a sequence has n <= clusters real queries, every one is its own cluster
//     (singleton clusters), so the mechanism is exactly softmax attention.
// Padded queries (see QueryValidity) take no part in initialisation, votes or centroid means; they
// are still assigned to their nearest centroid so that their outputs are finite.
// Cost per (batch, head): O(L E B) hashing, O(L C') popcounts for the initialisation and per
// Lloyd iteration, O(L B) for the votes; (batch, head) pairs run in parallel.
#ifndef VIDCLF_MODEL_ATTENTION_CLUSTERING_H_
#define VIDCLF_MODEL_ATTENTION_CLUSTERING_H_

#include <torch/torch.h>

#include <cstdint>

#include "model/attention/attention.h"

namespace vidclf::model::attention {

// The clustering's parameters (thesis defaults: C = 100, B = 63, L = 10).
inline constexpr AttentionParameter kClusters{"clusters", 100, "query clusters C", 8};
inline constexpr AttentionParameter kHashBits{"hash_bits", 63, "hash bits B per query, at most 63"};
inline constexpr AttentionParameter kLloydIterations{"lloyd_iterations", 10,
                                                     "Lloyd iterations of the Hamming K-means"};

// Throws c10::Error unless hash_bits is in [1, 63], clusters >= 1 and lloyd_iterations >= 0.
// `name` is the mechanism's registry name, used in the messages.
void CheckClusteringOptions(const AttentionOptions& options, const char* name);

// [B, L] bool: which queries are real. With self-attention shapes (L == S) the key-padding mask
// marks the queries too (query i is frame i); otherwise, or with no mask, every query is real.
torch::Tensor QueryValidity(const torch::Tensor& queries, const torch::Tensor& keys,
                            const torch::Tensor& key_padding_mask);

// Hash codes [B, H, L, bits] of queries [B, H, L, E], as 0/1 in the queries' dtype.
torch::Tensor HashQueries(const torch::Tensor& queries, int64_t bits, uint64_t seed);

struct QueryClusters {
  // [B, H, L] int64 in [0, num_clusters), on the queries' device: the cluster of every query,
  // padded ones included.
  torch::Tensor assignment;
  int64_t num_clusters = 0;
};

// Clusters queries [B, H, L, E] with query_valid [B, L] as described in the file comment, reading
// clusters, hash_bits, lloyd_iterations and seed.
QueryClusters ClusterQueries(const torch::Tensor& queries, const torch::Tensor& query_valid,
                             const AttentionOptions& options);

// ClusterQueries as batched tensor operations on the queries' device, with the same result: what
// it runs for queries on CUDA, where copying the codes to a CPU core would cost far more than
// one [L, C] distance matrix per (batch, head) and Lloyd iteration. Exposed to be checked against
// the CPU's clustering on any device.
QueryClusters ClusterQueriesWithTensors(const torch::Tensor& queries,
                                        const torch::Tensor& query_valid,
                                        const AttentionOptions& options);

// Floating-point operations per head of hashing n queries of width e, clustering them and the
// centroids' attention: the cost shared by both clustered mechanisms.
double ClusteringFlops(double n, double e, const AttentionOptions& options);

// Softmax over the last dimension in which entries where `valid` (broadcastable bool; undefined =
// all valid) is false get exactly zero weight. A row with no valid entry is finite (uniform) but
// meaningless.
torch::Tensor MaskedSoftmax(const torch::Tensor& scores, const torch::Tensor& valid);

// What both mechanisms compute first: the clustering and the centroid attention
// A^c = softmax(scale * Q^c K^T) [B, H, C', S] (padded keys weigh zero), Q^c the mean of each
// cluster's real queries in the original space (zero for an empty cluster).
struct CentroidAttention {
  QueryClusters clusters;
  torch::Tensor weights;  // A^c
};
CentroidAttention ComputeCentroidAttention(const torch::Tensor& queries, const torch::Tensor& keys,
                                           const torch::Tensor& key_padding_mask,
                                           const AttentionOptions& options);

// Rows of per_cluster [B, H, C', M] handed to each query: result[b, h, i] =
// per_cluster[b, h, assignment[b, h, i]], shaped [B, H, L, M].
torch::Tensor BroadcastToQueries(const torch::Tensor& per_cluster, const torch::Tensor& assignment);

}  // namespace vidclf::model::attention

#endif  // VIDCLF_MODEL_ATTENTION_CLUSTERING_H_
