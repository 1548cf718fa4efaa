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

}  // namespace vidclf::model::attention
