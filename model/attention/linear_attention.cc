#include "model/attention/linear_attention.h"

#include <cmath>

namespace vidclf::model::attention {

torch::Tensor EluFeatureMap(const torch::Tensor& x) { return torch::elu(x) + 1; }

torch::Tensor ZeroPaddedKeys(const torch::Tensor& x, const torch::Tensor& key_padding_mask) {
  if (!key_padding_mask.defined()) return x;
  const torch::Tensor padded =
      key_padding_mask.to(x.device())
          .logical_not()
          .view({key_padding_mask.size(0), 1, key_padding_mask.size(1), 1});
  return x.masked_fill(padded, 0);
}

torch::Tensor LinearAttentionFromFeatures(const torch::Tensor& phi_q, const torch::Tensor& phi_k,
                                          const torch::Tensor& values, double epsilon) {
  const torch::Tensor kv = torch::matmul(phi_k.transpose(-2, -1), values);  // [B, H, D, M]
  const torch::Tensor z = phi_k.sum(/*dim=*/2).unsqueeze(-1);               // [B, H, D, 1]
  return torch::matmul(phi_q, kv) / (torch::matmul(phi_q, z) + epsilon);
}

LinearAttention::LinearAttention(const AttentionOptions& options) : options_(options) {
  TORCH_CHECK(std::isfinite(options_.epsilon) && options_.epsilon > 0,
              "linear attention needs a finite epsilon > 0; got ", options_.epsilon);
  TORCH_CHECK(!options_.causal,
              "linear attention is non-causal; use type \"causal-linear\" for causal masking");
}

torch::Tensor LinearAttention::forward(const torch::Tensor& queries, const torch::Tensor& keys,
                                       const torch::Tensor& values,
                                       const torch::Tensor& key_padding_mask) {
  CheckAttentionInputs(queries, keys, values, key_padding_mask);
  return LinearAttentionFromFeatures(EluFeatureMap(queries),
                                     ZeroPaddedKeys(EluFeatureMap(keys), key_padding_mask),
                                     ZeroPaddedKeys(values, key_padding_mask), options_.epsilon);
}

const AttentionSpec& LinearAttentionSpec() {
  static const auto* spec = [] {
    auto* spec = new AttentionSpec;
    spec->name = "linear";
    spec->summary = "kernel feature map elu(x) + 1, linear in the positions";
    spec->causality = Causality::kNever;
    spec->flops_per_head = [](double n, double e, const AttentionOptions& /*options*/) {
      // 4 n e^2 + 4 n e: phi(K)^T V, phi(Q) times it, and the normaliser.
      return 4 * n * e * e + 4 * n * e;
    };
    spec->make = &Construct<LinearAttention>;
    return spec;
  }();
  return *spec;
}

}  // namespace vidclf::model::attention
