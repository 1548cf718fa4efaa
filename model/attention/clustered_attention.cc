#include "model/attention/clustered_attention.h"

#include "model/attention/clustering.h"

namespace vidclf::model::attention {

ClusteredAttention::ClusteredAttention(const AttentionOptions& options) : options_(options) {
  CheckClusteringOptions(options_, "clustered");
}

torch::Tensor ClusteredAttention::forward(const torch::Tensor& queries, const torch::Tensor& keys,
                                          const torch::Tensor& values,
                                          const torch::Tensor& key_padding_mask) {
  CheckAttentionInputs(queries, keys, values, key_padding_mask);
  const CentroidAttention centroid =
      ComputeCentroidAttention(queries, keys, key_padding_mask, options_);
  return BroadcastToQueries(torch::matmul(centroid.weights, values), centroid.clusters.assignment);
}

const AttentionSpec& ClusteredAttentionSpec() {
  static const auto* spec = [] {
    auto* spec = new AttentionSpec;
    spec->name = "clustered";
    spec->summary =
        "softmax over C query clusters of hashed queries, each query given its centroid's row";
    spec->causality = Causality::kNever;
    spec->parameters = {kClusters, kHashBits, kLloydIterations};
    spec->flops_per_head = [](double n, double e, const AttentionOptions& options) {
      // Hashing, Lloyd iterations and the centroids' attention.
      return ClusteringFlops(n, e, options);
    };
    spec->make = &Construct<ClusteredAttention>;
    return spec;
  }();
  return *spec;
}

}  // namespace vidclf::model::attention
