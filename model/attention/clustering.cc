#include "model/attention/clustering.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <limits>
#include <vector>

namespace vidclf::model::attention {
namespace {

// Nearest centroid by Hamming distance; codes [B, H, L, bits], centroids [B, H, C, bits].
torch::Tensor NearestCentroid(const torch::Tensor& codes, const torch::Tensor& centroids) {
  const torch::Tensor distance = codes.sum(-1, /*keepdim=*/true) + centroids.sum(-1).unsqueeze(-2) -
                                 2 * torch::matmul(codes, centroids.transpose(-2, -1));
  return distance.argmin(-1);  // ties: the first (lowest) cluster index
}

}  // namespace

void CheckClusteringOptions(const AttentionOptions& options, const char* name) {
  TORCH_CHECK(options.hash_bits >= 1 && options.hash_bits <= 63, name,
              " attention needs hash_bits in [1, 63]; got ", options.hash_bits);
  TORCH_CHECK(options.clusters >= 1, name, " attention needs clusters >= 1; got ",
              options.clusters);
  TORCH_CHECK(options.lloyd_iterations >= 0, name, " attention needs lloyd_iterations >= 0; got ",
              options.lloyd_iterations);
}

torch::Tensor QueryValidity(const torch::Tensor& queries, const torch::Tensor& keys,
                            const torch::Tensor& key_padding_mask) {
  if (key_padding_mask.defined() && queries.size(2) == keys.size(2)) {
    return key_padding_mask.to(queries.device());
  }
  return torch::ones({queries.size(0), queries.size(2)},
                     torch::TensorOptions().dtype(torch::kBool).device(queries.device()));
}

torch::Tensor HashQueries(const torch::Tensor& queries, int64_t bits, uint64_t seed) {
  torch::NoGradGuard no_grad;
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  const torch::Tensor planes =
      torch::randn({bits, queries.size(-1)}, generator, torch::kFloat64).to(queries.options());
  return (torch::matmul(queries.detach(), planes.t()) > 0).to(queries.scalar_type());
}

QueryClusters ClusterQueries(const torch::Tensor& queries, const torch::Tensor& query_valid,
                             const AttentionOptions& options) {
  torch::NoGradGuard no_grad;
  const int64_t batch = queries.size(0), heads = queries.size(1), length = queries.size(2);
  const int64_t clusters = std::max<int64_t>(1, std::min(options.clusters, length));
  const torch::Tensor valid = query_valid.to(queries.device());
  const torch::Tensor real = valid.view({batch, 1, length, 1}).to(queries.scalar_type());
  const torch::Tensor count = valid.sum(1);                         // [B] int64
  const torch::Tensor rank = valid.to(torch::kLong).cumsum(1) - 1;  // rank among real queries

  const torch::Tensor codes = HashQueries(queries, options.hash_bits, options.seed);
  const int64_t bits = codes.size(-1);

  // Farthest-point initialisation: the first real query's code, then repeatedly the real query
  // farthest (Hamming) from the centroids so far, ties to the lowest position.
  const torch::Tensor first = valid.to(torch::kLong).argmax(1);  // first real position ([B])
  std::vector<torch::Tensor> chosen = {
      codes.gather(2, first.view({batch, 1, 1, 1}).expand({batch, heads, 1, bits}))};
  torch::Tensor nearest =
      torch::where(valid.view({batch, 1, length}), torch::full({1}, bits + 1.0, codes.options()),
                   torch::full({1}, -1.0, codes.options()));  // [B, H, L]
  for (int64_t j = 1; j < clusters; ++j) {
    nearest = torch::minimum(nearest, (codes - chosen.back()).abs().sum(-1));
    const torch::Tensor farthest = nearest.argmax(-1);  // [B, H]
    chosen.push_back(
        codes.gather(2, farthest.view({batch, heads, 1, 1}).expand({batch, heads, 1, bits})));
  }
  torch::Tensor centroids = torch::cat(chosen, 2);  // [B, H, C, bits]

  for (int64_t iteration = 0; iteration < options.lloyd_iterations; ++iteration) {
    const torch::Tensor members =
        torch::one_hot(NearestCentroid(codes, centroids), clusters).to(codes.scalar_type()) * real;
    const torch::Tensor size = members.sum(2).unsqueeze(-1);                         // [B, H, C, 1]
    const torch::Tensor ones = 2 * torch::matmul(members.transpose(-2, -1), codes);  // 2 * votes
    centroids = torch::where(ones > size, torch::ones_like(centroids),
                             torch::where(ones < size, torch::zeros_like(centroids), centroids));
  }
  torch::Tensor assignment = NearestCentroid(codes, centroids);  // [B, H, L]

  // Few enough real queries: each is its own cluster, exactly softmax.
  const torch::Tensor singleton = (count <= options.clusters).view({batch, 1, 1});
  assignment = torch::where(singleton, rank.clamp_min(0).view({batch, 1, length}), assignment);

  QueryClusters result;
  result.assignment = assignment;
  result.members = torch::one_hot(assignment, clusters).to(codes.scalar_type()) * real;
  result.num_clusters = clusters;
  return result;
}

torch::Tensor MaskedSoftmax(const torch::Tensor& scores, const torch::Tensor& valid) {
  if (!valid.defined()) return torch::softmax(scores, -1);
  // A finite fill (not -inf) keeps a row with no valid entry free of NaN.
  return torch::softmax(scores.masked_fill(valid.logical_not(), -std::numeric_limits<float>::max()),
                        -1);
}

CentroidAttention ComputeCentroidAttention(const torch::Tensor& queries, const torch::Tensor& keys,
                                           const torch::Tensor& key_padding_mask,
                                           const AttentionOptions& options) {
  CentroidAttention result;
  result.clusters =
      ClusterQueries(queries, QueryValidity(queries, keys, key_padding_mask), options);
  const torch::Tensor& members = result.clusters.members;  // [B, H, L, C]
  const torch::Tensor size = members.sum(2).unsqueeze(-1).clamp_min(1);
  const torch::Tensor centroids = torch::matmul(members.transpose(-2, -1), queries) / size;
  const torch::Tensor key_valid =
      key_padding_mask.defined()
          ? key_padding_mask.view({keys.size(0), 1, 1, keys.size(2)}).to(keys.device())
          : torch::Tensor();
  result.weights = MaskedSoftmax(
      torch::matmul(centroids, keys.transpose(-2, -1)) * ScoreScale(options), key_valid);
  return result;
}

torch::Tensor BroadcastToQueries(const torch::Tensor& per_cluster,
                                 const torch::Tensor& assignment) {
  const torch::Tensor index = assignment.unsqueeze(-1).expand(
      {assignment.size(0), assignment.size(1), assignment.size(2), per_cluster.size(-1)});
  return per_cluster.gather(2, index);
}

}  // namespace vidclf::model::attention
