#include "model/attention/improved_clustered_attention.h"

#include <algorithm>
#include <vector>

#include "model/attention/clustering.h"

namespace vidclf::model::attention {
namespace {

// Queries whose top keys are gathered at once.
constexpr int64_t kQueryBlock = 1024;

// Rows of per_key [B, H, S, D] picked by index [B, H, L, k]: result [B, H, L, k, D].
torch::Tensor GatherKeys(const torch::Tensor& per_key, const torch::Tensor& index) {
  const int64_t batch = index.size(0), heads = index.size(1), length = index.size(2),
                k = index.size(3), width = per_key.size(3);
  return per_key.unsqueeze(2)
      .expand({batch, heads, length, per_key.size(2), width})
      .gather(3, index.unsqueeze(-1).expand({batch, heads, length, k, width}));
}

}  // namespace

ImprovedClusteredAttention::ImprovedClusteredAttention(const AttentionOptions& options)
    : options_(options) {
  CheckClusteringOptions(options_, "improved-clustered");
  TORCH_CHECK(options_.topk >= 1, "improved-clustered attention needs topk >= 1; got ",
              options_.topk);
}

torch::Tensor ImprovedClusteredAttention::forward(const torch::Tensor& queries,
                                                  const torch::Tensor& keys,
                                                  const torch::Tensor& values,
                                                  const torch::Tensor& key_padding_mask) {
  CheckAttentionInputs(queries, keys, values, key_padding_mask);
  const CentroidAttention centroid =
      ComputeCentroidAttention(queries, keys, key_padding_mask, options_);
  const torch::Tensor& weights = centroid.weights;  // A^c [B, H, C, S]
  const torch::Tensor& assignment = centroid.clusters.assignment;
  const int64_t k = std::min(options_.topk, keys.size(2));

  // Top keys per cluster among the real keys; a padded key is only picked when a sequence has
  // fewer than k real keys, and is then flagged and given no weight.
  torch::Tensor ranking = weights.detach();
  if (key_padding_mask.defined()) {
    ranking = ranking.masked_fill(key_padding_mask.logical_not()
                                      .view({keys.size(0), 1, 1, keys.size(2)})
                                      .to(ranking.device()),
                                  -1);
  }
  const auto [picked, top] = ranking.topk(k, -1);  // [B, H, C, k]
  const torch::Tensor top_real = picked >= 0;
  const torch::Tensor mass =
      (weights.gather(-1, top) * top_real.to(weights.scalar_type())).sum(-1, /*keepdim=*/true);
  // V^b: the clustered output without the top keys, once per cluster.
  const torch::Tensor background = torch::matmul(weights.scatter(-1, top, 0.0), values);

  // V^t: per query, the exact softmax over its cluster's top keys, scaled to the cluster's mass.
  // Queries go in blocks so that the gathered keys and values take O(block k (E + M)) memory, not
  // O(L k (E + M)) (4.8 GiB at L = 65536 with 8 heads of 64 before blocking).
  const torch::Tensor query_top = BroadcastToQueries(top, assignment);  // [B, H, L, k]
  const torch::Tensor query_top_real = BroadcastToQueries(top_real, assignment);
  const torch::Tensor query_mass = BroadcastToQueries(mass, assignment);
  std::vector<torch::Tensor> blocks;
  for (int64_t begin = 0; begin < queries.size(2); begin += kQueryBlock) {
    auto rows = [begin](const torch::Tensor& t) { return t.slice(2, begin, begin + kQueryBlock); };
    const torch::Tensor block_top = rows(query_top);
    const torch::Tensor scores =
        torch::matmul(GatherKeys(keys, block_top), rows(queries).unsqueeze(-1)).squeeze(-1) *
        ScoreScale(options_);
    const torch::Tensor top_weights =
        MaskedSoftmax(scores, rows(query_top_real)) * rows(query_mass);
    blocks.push_back(
        torch::matmul(top_weights.unsqueeze(-2), GatherKeys(values, block_top)).squeeze(-2));
  }
  const torch::Tensor top_output = torch::cat(blocks, 2);
  return top_output + BroadcastToQueries(background, assignment);
}

}  // namespace vidclf::model::attention
