#include "model/attention/linformer_attention.h"

#include <cmath>

namespace vidclf::model::attention {
namespace {

// The first `length` columns of a projection [k, n_max], in `like`'s dtype and device, with the
// columns of padded keys zeroed per batch element: [1, 1, k, S] or, with a mask, [B, 1, k, S].
torch::Tensor Project(const torch::Tensor& projection, int64_t length, const torch::Tensor& mask,
                      const torch::Tensor& like) {
  torch::Tensor used =
      projection.slice(1, 0, length).to(like.device(), like.scalar_type()).unsqueeze(0);
  if (mask.defined()) {
    used = used * mask.to(like.device(), like.scalar_type()).view({mask.size(0), 1, length});
  }
  return used.unsqueeze(1);
}

}  // namespace

LinformerAttention::LinformerAttention(const AttentionOptions& options) : options_(options) {
  TORCH_CHECK(kLinformerK.Of(options_) >= 1, "linformer attention needs linformer_k >= 1; got ",
              kLinformerK.Of(options_));
  TORCH_CHECK(options_.max_length >= 1, "linformer attention needs max_length >= 1; got ",
              options_.max_length);
  const double stddev = 1.0 / std::sqrt(static_cast<double>(kLinformerK.Of(options_)));
  key_projection = register_parameter(
      "key_projection", torch::randn({kLinformerK.Of(options_), options_.max_length}) * stddev);
  value_projection = register_parameter(
      "value_projection", torch::randn({kLinformerK.Of(options_), options_.max_length}) * stddev);
}

torch::Tensor LinformerAttention::forward(const torch::Tensor& queries, const torch::Tensor& keys,
                                          const torch::Tensor& values,
                                          const torch::Tensor& key_padding_mask) {
  CheckAttentionInputs(queries, keys, values, key_padding_mask);
  const int64_t length = keys.size(2);
  TORCH_CHECK(
      length <= key_projection.size(1), "linformer attention got ", length,
      " keys but its projections E and F were built for max_length = ", key_projection.size(1));
  const torch::Tensor short_keys =
      torch::matmul(Project(key_projection, length, key_padding_mask, keys), keys);
  const torch::Tensor short_values =
      torch::matmul(Project(value_projection, length, key_padding_mask, values), values);
  const torch::Tensor weights = torch::softmax(
      torch::matmul(queries, short_keys.transpose(-2, -1)) * ScoreScale(options_), -1);
  return torch::matmul(weights, short_values);  // [B, H, L, M]
}

const AttentionSpec& LinformerAttentionSpec() {
  static const auto* spec = [] {
    auto* spec = new AttentionSpec;
    spec->name = "linformer";
    spec->summary = "keys and values projected to k positions by learned E and F";
    spec->causality = Causality::kNever;
    spec->substitutable = false;
    spec->bounded_by_max_length = true;
    spec->parameters = {kLinformerK};
    spec->flops_per_head = [](double n, double e, const AttentionOptions& options) {
      // 4 k n e + 4 n k e: E K and F V, then Q (E K)^T and A (F V).
      const double k = static_cast<double>(kLinformerK.Of(options));
      return 4 * k * n * e + 4 * n * k * e;
    };
    spec->make = &Construct<LinformerAttention>;
    return spec;
  }();
  return *spec;
}

}  // namespace vidclf::model::attention
