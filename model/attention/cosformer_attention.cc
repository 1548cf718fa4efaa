#include "model/attention/cosformer_attention.h"

#include <algorithm>
#include <cmath>

#include "model/attention/causal_linear_attention.h"
#include "model/attention/linear_attention.h"

namespace vidclf::model::attention {
namespace {

constexpr double kPi = 3.14159265358979323846;

// [relu(x_p) cos(pi p / 2 alpha), relu(x_p) sin(pi p / 2 alpha)] for the rows p of x [B, H, N, E].
torch::Tensor CosformerFeatures(const torch::Tensor& x, int64_t alpha) {
  // Angles in double, then cast, so float64 inputs get float64-accurate weights.
  const torch::Tensor angle =
      torch::arange(x.size(2), x.options().dtype(torch::kDouble)) * (kPi / (2.0 * alpha));
  const torch::Tensor cos = angle.cos().to(x.scalar_type()).view({1, 1, -1, 1});
  const torch::Tensor sin = angle.sin().to(x.scalar_type()).view({1, 1, -1, 1});
  const torch::Tensor relu = torch::relu(x);
  return torch::cat({relu * cos, relu * sin}, /*dim=*/-1);
}

}  // namespace

CosformerAttention::CosformerAttention(const AttentionOptions& options) : options_(options) {
  TORCH_CHECK(options_.max_length >= 1, "cosformer attention needs max_length (alpha) >= 1; got ",
              options_.max_length);
  TORCH_CHECK(std::isfinite(options_.epsilon) && options_.epsilon > 0,
              "cosformer attention needs a finite epsilon > 0; got ", options_.epsilon);
}

torch::Tensor CosformerAttention::forward(const torch::Tensor& queries, const torch::Tensor& keys,
                                          const torch::Tensor& values,
                                          const torch::Tensor& key_padding_mask) {
  CheckAttentionInputs(queries, keys, values, key_padding_mask);
  const int64_t length = std::max(queries.size(2), keys.size(2));
  TORCH_CHECK(length <= options_.max_length, "cosformer attention got a sequence of length ",
              length, ", longer than max_length (alpha) = ", options_.max_length,
              "; beyond alpha the cos re-weighting turns negative");
  const torch::Tensor phi_q = CosformerFeatures(queries, options_.max_length);
  const torch::Tensor phi_k =
      ZeroPaddedKeys(CosformerFeatures(keys, options_.max_length), key_padding_mask);
  const torch::Tensor v = ZeroPaddedKeys(values, key_padding_mask);
  if (!options_.causal) return LinearAttentionFromFeatures(phi_q, phi_k, v, options_.epsilon);
  TORCH_CHECK(queries.size(2) == keys.size(2),
              "causal cosformer attention needs as many queries as keys (L == S); got L = ",
              queries.size(2), ", S = ", keys.size(2));
  return CausalLinearAttentionFromFeatures(phi_q, phi_k, v, options_.epsilon, AttentionState{})
      .first;
}

const AttentionSpec& CosformerAttentionSpec() {
  static const auto* spec = [] {
    auto* spec = new AttentionSpec;
    spec->name = "cosformer";
    spec->summary =
        "ReLU features re-weighted by cos(pi (i - j) / 2 alpha), linear in the positions";
    spec->causality = Causality::kWhenAsked;
    spec->flops_per_head = [](double n, double e, const AttentionOptions& /*options*/) {
      // Twice linear: the cos and sin re-weighted halves.
      return 2 * (4 * n * e * e + 4 * n * e);
    };
    spec->make = &Construct<CosformerAttention>;
    return spec;
  }();
  return *spec;
}

}  // namespace vidclf::model::attention
