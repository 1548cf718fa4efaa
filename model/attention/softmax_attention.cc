#include "model/attention/softmax_attention.h"

#include <torch/version.h>

#include <cmath>
#include <limits>

namespace vidclf::model::attention {

SoftmaxAttention::SoftmaxAttention(const AttentionOptions& options) : options_(options) {
  TORCH_CHECK(options_.head_dim >= 1, "softmax attention needs head_dim >= 1; got ",
              options_.head_dim);
  TORCH_CHECK(std::isfinite(options_.scale) && options_.scale >= 0,
              "softmax attention needs a finite scale >= 0 (0 means 1/sqrt(head_dim)); got ",
              options_.scale);
}

torch::Tensor SoftmaxAttention::forward(const torch::Tensor& queries, const torch::Tensor& keys,
                                        const torch::Tensor& values,
                                        const torch::Tensor& key_padding_mask) {
  CheckAttentionInputs(queries, keys, values, key_padding_mask);
  const int64_t batch = queries.size(0), length = queries.size(2), keys_length = keys.size(2);
  const double scale = ScoreScale(options_);
  // Padded keys get weight 0, but 0 * inf is NaN and the fused kernel adds its -inf mask to the
  // scores: clear padded key and value rows so that no garbage in them can leak.
  torch::Tensor k = keys, v = values;
  if (key_padding_mask.defined()) {
    const torch::Tensor padded =
        key_padding_mask.to(values.device()).logical_not().view({batch, 1, keys_length, 1});
    k = keys.masked_fill(padded, 0);
    v = values.masked_fill(padded, 0);
  }

  // Which keys each query may see: [B, 1, 1, S] for padding alone, [B or 1, 1, L, S] with the
  // causal mask. Undefined means "all of them".
  torch::Tensor allowed;
  if (key_padding_mask.defined()) {
    allowed = key_padding_mask.to(queries.device()).view({batch, 1, 1, keys_length});
  }
  if (options_.causal) {
    const torch::Tensor causal =
        torch::ones({length, keys_length}, queries.options().dtype(torch::kBool))
            .tril()
            .view({1, 1, length, keys_length});
    allowed = allowed.defined() ? allowed.logical_and(causal) : causal;
  }
  // Rows with no allowed key would give softmax(-inf, ..., -inf) = NaN (in the gradient too).
  // Let such rows attend to everything and zero their output afterwards.
  torch::Tensor empty_rows;
  if (allowed.defined()) {
    empty_rows = allowed.any(/*dim=*/-1, /*keepdim=*/true).logical_not();
    allowed = allowed.logical_or(empty_rows);
  }

  torch::Tensor out;
#if TORCH_VERSION_MAJOR >= 2
  // The fused kernel's scale is 1/sqrt(E) (a `scale` argument exists only from 2.1), so it is used
  // only when that is the scale asked for. A bool attn_mask there is true where a key takes part.
  const bool default_scale =
      std::abs(scale * std::sqrt(static_cast<double>(queries.size(3))) - 1.0) < 1e-12;
  if (default_scale) {
    out = allowed.defined() ? torch::scaled_dot_product_attention(queries, k, v, allowed)
                            : torch::scaled_dot_product_attention(queries, k, v);
  }
#endif
  if (!out.defined()) {
    torch::Tensor scores = torch::matmul(queries, k.transpose(-2, -1)) * scale;  // [B,H,L,S]
    if (allowed.defined()) {
      scores = scores.masked_fill(allowed.logical_not(), -std::numeric_limits<double>::infinity());
    }
    // torch::softmax subtracts the row maximum, so logits of any magnitude stay finite.
    out = torch::matmul(torch::softmax(scores, /*dim=*/-1), v);
  }
  if (empty_rows.defined()) out = out.masked_fill(empty_rows, 0);
  return out;
}

const AttentionSpec& SoftmaxAttentionSpec() {
  static const auto* spec = [] {
    auto* spec = new AttentionSpec;
    spec->name = "softmax";
    spec->summary = "exact scaled dot-product attention, quadratic in the positions";
    spec->causality = Causality::kWhenAsked;
    spec->flops_per_head = [](double n, double e, const AttentionOptions& /*options*/) {
      // 4 n^2 e: Q K^T, then A V.
      return 4 * n * n * e;
    };
    spec->make = &Construct<SoftmaxAttention>;
    return spec;
  }();
  return *spec;
}

}  // namespace vidclf::model::attention
