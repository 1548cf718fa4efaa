#include "train/attention_cost.h"

#include "model/attention/registry.h"

namespace vidclf::train {

double AttentionFlopsPerClip(const model::ModelConfig& config, int64_t frames) {
  if (config.head != model::HeadType::kTransformer) return 0;
  const model::TransformerHeadConfig& t = config.transformer;
  const absl::StatusOr<const model::attention::AttentionSpec*> spec =
      model::attention::FindAttention(t.attention.type);
  if (!spec.ok()) return 0;
  const auto n = static_cast<double>(frames + (t.pooling == model::Pooling::kCls ? 1 : 0));
  const auto e = static_cast<double>(t.d_model / t.num_heads);
  return (*spec)->flops_per_head(n, e, t.attention) * static_cast<double>(t.num_heads) *
         static_cast<double>(t.num_layers);
}

}  // namespace vidclf::train
