#include "model/attention/improved_clustered_attention.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "model/attention/clustering.h"

namespace vidclf::model::attention {
namespace {

// Queries whose top keys are gathered at once.
constexpr int64_t kQueryBlock = 1024;

// Rows of table [N, D] picked by row numbers [B, H, L, k]: result [B, H, L, k, D].
torch::Tensor GatherRows(const torch::Tensor& table, const torch::Tensor& rows) {
  std::vector<int64_t> shape = rows.sizes().vec();
  shape.push_back(table.size(1));
  return table.index_select(0, rows.reshape({-1})).view(shape);
}

// V^t by gathering, for every query, its cluster's k keys and values: tensor operations that run
// on any device and carry gradients, at O(L k (E + M)) memory traffic.
torch::Tensor TopKeysOutputByGather(const torch::Tensor& queries, const torch::Tensor& keys,
                                    const torch::Tensor& values, const torch::Tensor& top,
                                    const torch::Tensor& top_real, const torch::Tensor& mass,
                                    const torch::Tensor& assignment, double scale) {
  // Keys and values as tables of B H S rows, and each query's top keys as row numbers in them. A
  // gather from the keys expanded over the queries picks the same rows, but its gradient fills a
  // zero tensor of that expanded [B, H, L, S, D] shape, quadratic in the length (a 4,841 MiB peak
  // training on 903-frame clips, batch 16).
  const int64_t batch = keys.size(0), heads = keys.size(1), length = keys.size(2);
  const torch::Tensor key_table = keys.reshape({-1, keys.size(3)});
  const torch::Tensor value_table = values.reshape({-1, values.size(3)});
  const torch::Tensor first_row =
      (torch::arange(batch * heads, top.options()) * length).view({batch, heads, 1, 1});
  // Queries go in blocks so that the gathered keys and values take O(block k (E + M)) memory, not
  // O(L k (E + M)) (4.8 GiB at L = 65536 with 8 heads of 64 before blocking).
  const torch::Tensor query_top = BroadcastToQueries(top, assignment) + first_row;  // [B, H, L, k]
  const torch::Tensor query_top_real = BroadcastToQueries(top_real, assignment);
  const torch::Tensor query_mass = BroadcastToQueries(mass, assignment);
  std::vector<torch::Tensor> blocks;
  for (int64_t begin = 0; begin < queries.size(2); begin += kQueryBlock) {
    auto rows = [begin](const torch::Tensor& t) { return t.slice(2, begin, begin + kQueryBlock); };
    const torch::Tensor block_top = rows(query_top);
    const torch::Tensor scores =
        torch::matmul(GatherRows(key_table, block_top), rows(queries).unsqueeze(-1)).squeeze(-1) *
        scale;
    const torch::Tensor top_weights =
        MaskedSoftmax(scores, rows(query_top_real)) * rows(query_mass);
    blocks.push_back(
        torch::matmul(top_weights.unsqueeze(-2), GatherRows(value_table, block_top)).squeeze(-2));
  }
  return torch::cat(blocks, 2);
}

// The same V^t on the CPU without gradients: each query reads its cluster's k keys and values
// from per-cluster copies (O(C k (E + M)) per head, built once), so nothing per query is
// materialised. Inputs contiguous; top_real, mass and assignment as in TopKeysOutputByGather.
template <typename Scalar>
torch::Tensor TopKeysOutputOnCpu(const torch::Tensor& queries, const torch::Tensor& keys,
                                 const torch::Tensor& values, const torch::Tensor& top,
                                 const torch::Tensor& top_real, const torch::Tensor& mass,
                                 const torch::Tensor& assignment, double scale) {
  const int64_t sequences = queries.size(0) * queries.size(1), length = queries.size(2),
                width = queries.size(3), key_count = keys.size(2), value_width = values.size(3),
                clusters = top.size(2), k = top.size(3);
  torch::Tensor output =
      torch::empty({queries.size(0), queries.size(1), length, value_width}, queries.options());
  const Scalar* query = queries.data_ptr<Scalar>();
  const Scalar* key = keys.data_ptr<Scalar>();
  const Scalar* value = values.data_ptr<Scalar>();
  const int64_t* top_index = top.data_ptr<int64_t>();
  const bool* top_is_real = top_real.data_ptr<bool>();
  const Scalar* cluster_mass = mass.data_ptr<Scalar>();
  const int64_t* cluster_of = assignment.data_ptr<int64_t>();
  Scalar* out = output.data_ptr<Scalar>();
  at::parallel_for(0, sequences, 1, [&](int64_t begin, int64_t end) {
    // Per cluster: its top keys transposed [E, k], so that a query's k scores are one pass of
    // axpys over contiguous rows, and its top values [k, M].
    std::vector<Scalar> top_keys(clusters * width * k), top_values(clusters * k * value_width);
    std::vector<Scalar> weight(k);
    for (int64_t sequence = begin; sequence < end; ++sequence) {
      const Scalar* sequence_keys = key + sequence * key_count * width;
      const Scalar* sequence_values = value + sequence * key_count * value_width;
      for (int64_t c = 0; c < clusters; ++c) {
        for (int64_t j = 0; j < k; ++j) {
          const int64_t picked = top_index[(sequence * clusters + c) * k + j];
          for (int64_t e = 0; e < width; ++e) {
            top_keys[(c * width + e) * k + j] = sequence_keys[picked * width + e];
          }
          std::copy_n(sequence_values + picked * value_width, value_width,
                      top_values.begin() + (c * k + j) * value_width);
        }
      }
      for (int64_t i = 0; i < length; ++i) {
        const int64_t c = cluster_of[sequence * length + i];
        const Scalar* q = query + (sequence * length + i) * width;
        const bool* real = top_is_real + (sequence * clusters + c) * k;
        std::fill(weight.begin(), weight.end(), Scalar{0});
        for (int64_t e = 0; e < width; ++e) {
          const Scalar* row = top_keys.data() + (c * width + e) * k;
          for (int64_t j = 0; j < k; ++j) weight[j] += q[e] * row[j];
        }
        // Softmax over the real top keys (MaskedSoftmax: padded ones weigh zero, and a cluster
        // with none weighs all k equally), scaled to the cluster's mass.
        const bool any_real = std::find(real, real + k, true) != real + k;
        Scalar max_score = -std::numeric_limits<Scalar>::infinity();
        for (int64_t j = 0; j < k; ++j) {
          weight[j] = any_real && !real[j] ? Scalar{0} : weight[j] * static_cast<Scalar>(scale);
          if (!any_real || real[j]) max_score = std::max(max_score, weight[j]);
        }
        Scalar total = 0;
        for (int64_t j = 0; j < k; ++j) {
          weight[j] = !any_real ? Scalar{1} : (real[j] ? std::exp(weight[j] - max_score) : 0);
          total += weight[j];
        }
        const Scalar factor = cluster_mass[sequence * clusters + c] / total;
        Scalar* row_out = out + (sequence * length + i) * value_width;
        std::fill_n(row_out, value_width, Scalar{0});
        for (int64_t j = 0; j < k; ++j) {
          const Scalar w = weight[j] * factor;
          const Scalar* v = top_values.data() + (c * k + j) * value_width;
          for (int64_t m = 0; m < value_width; ++m) row_out[m] += w * v[m];
        }
      }
    }
  });
  return output;
}

}  // namespace

ImprovedClusteredAttention::ImprovedClusteredAttention(const AttentionOptions& options)
    : options_(options) {
  CheckClusteringOptions(options_, "improved-clustered");
  TORCH_CHECK(kTopk.Of(options_) >= 1, "improved-clustered attention needs topk >= 1; got ",
              kTopk.Of(options_));
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
  const int64_t k = std::min(kTopk.Of(options_), keys.size(2));

  // Top keys per cluster among the real keys; a padded key is only picked when a sequence has
  // fewer than k real keys, and is then flagged and given no weight.
  torch::Tensor ranking = weights.detach();
  if (key_padding_mask.defined()) {
    ranking = ranking.masked_fill(key_padding_mask.logical_not()
                                      .view({keys.size(0), 1, 1, keys.size(2)})
                                      .to(ranking.device()),
                                  -1);
  }
  // Not a structured binding: the dispatch lambda below captures `top`, which C++17 allows
  // only for variables.
  const std::tuple<torch::Tensor, torch::Tensor> ranked = ranking.topk(k, -1);  // [B, H, C, k]
  const torch::Tensor& top = std::get<1>(ranked);
  const torch::Tensor top_real = std::get<0>(ranked) >= 0;
  const torch::Tensor mass =
      (weights.gather(-1, top) * top_real.to(weights.scalar_type())).sum(-1, /*keepdim=*/true);
  // V^b: the clustered output without the top keys, once per cluster.
  const torch::Tensor background = torch::matmul(weights.scatter(-1, top, 0.0), values);

  // V^t: per query, the exact softmax over its cluster's top keys, scaled to the cluster's mass.
  const bool needs_gradient =
      torch::GradMode::is_enabled() &&
      (queries.requires_grad() || keys.requires_grad() || values.requires_grad());
  torch::Tensor top_output;
  if (queries.device().is_cpu() && !needs_gradient) {
    AT_DISPATCH_FLOATING_TYPES(queries.scalar_type(), "improved_clustered_top_keys", [&] {
      top_output = TopKeysOutputOnCpu<scalar_t>(
          queries.contiguous(), keys.contiguous(), values.contiguous(), top.contiguous(),
          top_real.contiguous(), mass.contiguous(), assignment.contiguous(), ScoreScale(options_));
    });
  } else {
    top_output = TopKeysOutputByGather(queries, keys, values, top, top_real, mass, assignment,
                                       ScoreScale(options_));
  }
  return top_output + BroadcastToQueries(background, assignment);
}

const AttentionSpec& ImprovedClusteredAttentionSpec() {
  static const auto* spec = [] {
    auto* spec = new AttentionSpec;
    spec->name = "improved-clustered";
    spec->summary = "clustered attention with each cluster's top-k keys computed exactly";
    spec->causality = Causality::kNever;
    spec->parameters = {kClusters, kHashBits, kLloydIterations, kTopk};
    spec->flops_per_head = [](double n, double e, const AttentionOptions& options) {
      // Clustered, plus 4 n k e for the exact top-k part.
      return ClusteringFlops(n, e, options) +
             4 * n * std::min(static_cast<double>(kTopk.Of(options)), n) * e;
    };
    spec->make = &Construct<ImprovedClusteredAttention>;
    return spec;
  }();
  return *spec;
}

}  // namespace vidclf::model::attention
