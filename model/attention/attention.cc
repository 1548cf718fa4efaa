#include "model/attention/attention.h"

#include <cmath>

namespace vidclf::model::attention {
int64_t AttentionParameter::Of(const AttentionOptions& options) const {
  const auto it = options.parameters.find(key);
  return it == options.parameters.end() ? default_value : it->second;
}

double ScoreScale(const AttentionOptions& options) {
  return options.scale != 0 ? options.scale
                            : 1.0 / std::sqrt(static_cast<double>(options.head_dim));
}

void CheckAttentionInputs(const torch::Tensor& queries, const torch::Tensor& keys,
                          const torch::Tensor& values, const torch::Tensor& key_padding_mask) {
  TORCH_CHECK(queries.dim() == 4 && keys.dim() == 4 && values.dim() == 4,
              "attention expects queries, keys and values shaped [B, H, L, E], [B, H, S, E] and "
              "[B, H, S, M]; got ",
              queries.sizes(), ", ", keys.sizes(), " and ", values.sizes());
  TORCH_CHECK(queries.size(0) == keys.size(0) && keys.size(0) == values.size(0) &&
                  queries.size(1) == keys.size(1) && keys.size(1) == values.size(1),
              "attention inputs disagree on batch or heads: ", queries.sizes(), ", ", keys.sizes(),
              ", ", values.sizes());
  TORCH_CHECK(queries.size(3) == keys.size(3), "queries and keys must have the same width; got ",
              queries.size(3), " and ", keys.size(3));
  TORCH_CHECK(keys.size(2) == values.size(2), "keys and values must have the same length; got ",
              keys.size(2), " and ", values.size(2));
  if (key_padding_mask.defined()) {
    TORCH_CHECK(key_padding_mask.scalar_type() == torch::kBool && key_padding_mask.dim() == 2 &&
                    key_padding_mask.size(0) == keys.size(0) &&
                    key_padding_mask.size(1) == keys.size(2),
                "key_padding_mask must be bool [B, S] = [", keys.size(0), ", ", keys.size(2),
                "]; got ", key_padding_mask.scalar_type(), " ", key_padding_mask.sizes());
  }
}

std::pair<torch::Tensor, AttentionState> AttentionMechanism::forward_chunk(
    const torch::Tensor& /*queries*/, const torch::Tensor& /*keys*/,
    const torch::Tensor& /*values*/, const AttentionState& /*state*/) {
  TORCH_CHECK(false, name(),
              " has no recurrent form (causal-linear has); stream it over a sliding window");
}

std::pair<torch::Tensor, std::vector<AttentionState>> AttentionMechanism::forward_one_frame_each(
    const torch::Tensor& /*queries*/, const torch::Tensor& /*keys*/,
    const torch::Tensor& /*values*/, const std::vector<AttentionState>& /*states*/) const {
  TORCH_CHECK(false, name(), " has no one-frame step (causal-linear has)");
}

}  // namespace vidclf::model::attention
