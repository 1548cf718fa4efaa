#include "model/attention/causal_linear_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/attention/linear_attention.h"

namespace vidclf::model::attention {

std::pair<torch::Tensor, AttentionState> CausalLinearAttentionFromFeatures(
    const torch::Tensor& phi_q, const torch::Tensor& phi_k, const torch::Tensor& values,
    double epsilon, const AttentionState& state) {
  const int64_t batch = phi_q.size(0), heads = phi_q.size(1), length = phi_q.size(2);
  const int64_t features = phi_q.size(3), value_dim = values.size(3);
  TORCH_CHECK(state.s.defined() == state.z.defined(),
              "causal linear attention state must have both s and z, or neither");
  torch::Tensor s = state.s, z = state.z;
  if (s.defined()) {
    TORCH_CHECK(s.dim() == 4 && z.dim() == 3 && s.size(0) == z.size(0),
                "causal linear attention state must be s [B, H, E, M] and z [B, H, E]; got ",
                s.sizes(), " and ", z.sizes());
    TORCH_CHECK(s.size(0) == batch,
                "causal linear attention: batch size changed between chunks; the state was built "
                "for ",
                s.size(0), " sequences, this chunk has ", batch);
    TORCH_CHECK(s.size(1) == heads && s.size(2) == features && s.size(3) == value_dim &&
                    z.size(1) == heads && z.size(2) == features,
                "causal linear attention: the state [B, H, E, M] = ", s.sizes(), ", z ", z.sizes(),
                " does not fit this chunk's heads ", heads, ", width ", features,
                " and value width ", value_dim);
  } else {
    s = torch::zeros({batch, heads, features, value_dim}, phi_q.options());
    z = torch::zeros({batch, heads, features}, phi_q.options());
  }
  if (length == 0) return {torch::zeros({batch, heads, 0, value_dim}, values.options()), {s, z}};

  std::vector<torch::Tensor> outputs;
  for (int64_t start = 0; start < length; start += kCausalLinearBlock) {
    const int64_t end = std::min(start + kCausalLinearBlock, length);
    const torch::Tensor q = phi_q.slice(2, start, end), k = phi_k.slice(2, start, end);
    const torch::Tensor v = values.slice(2, start, end);
    // Within the block, weights phi(Q_i).phi(K_j) for j <= i; earlier blocks come through (s, z).
    const torch::Tensor weights = torch::matmul(q, k.transpose(-2, -1)).tril();
    const torch::Tensor numerator = torch::matmul(weights, v) + torch::matmul(q, s);
    const torch::Tensor denominator =
        weights.sum(/*dim=*/-1, /*keepdim=*/true) + torch::matmul(q, z.unsqueeze(-1));
    outputs.push_back(numerator / (denominator + epsilon));
    // A block of one frame (a live stream's step) adds an outer product: addcmul makes one
    // tensor where matmul and + make two, which the step's allocations show at many streams.
    s = end - start == 1 ? torch::addcmul(s, k.transpose(-2, -1), v)
                         : s + torch::matmul(k.transpose(-2, -1), v);
    z = z + k.sum(/*dim=*/2);
  }
  return {torch::cat(outputs, /*dim=*/2), {s, z}};
}

CausalLinearAttention::CausalLinearAttention(const AttentionOptions& options) : options_(options) {
  TORCH_CHECK(std::isfinite(options_.epsilon) && options_.epsilon > 0,
              "causal-linear attention needs a finite epsilon > 0; got ", options_.epsilon);
}

torch::Tensor CausalLinearAttention::forward(const torch::Tensor& queries,
                                             const torch::Tensor& keys, const torch::Tensor& values,
                                             const torch::Tensor& key_padding_mask) {
  CheckAttentionInputs(queries, keys, values, key_padding_mask);
  TORCH_CHECK(queries.size(2) == keys.size(2),
              "causal-linear attention needs as many queries as keys (L == S); got L = ",
              queries.size(2), ", S = ", keys.size(2));
  return CausalLinearAttentionFromFeatures(
             EluFeatureMap(queries), ZeroPaddedKeys(EluFeatureMap(keys), key_padding_mask),
             ZeroPaddedKeys(values, key_padding_mask), options_.epsilon, AttentionState{})
      .first;
}

std::pair<torch::Tensor, AttentionState> CausalLinearAttention::forward_chunk(
    const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
    const AttentionState& state) {
  CheckAttentionInputs(q, k, v, torch::Tensor());
  TORCH_CHECK(q.size(2) == k.size(2),
              "causal-linear attention chunks need as many queries as keys; got ", q.size(2),
              " and ", k.size(2));
  return CausalLinearAttentionFromFeatures(EluFeatureMap(q), EluFeatureMap(k), v, options_.epsilon,
                                           state);
}

}  // namespace vidclf::model::attention
