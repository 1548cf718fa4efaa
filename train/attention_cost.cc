#include "train/attention_cost.h"

#include <algorithm>

namespace vidclf::train {

double AttentionFlopsPerClip(const model::ModelConfig& config, int64_t frames) {
  if (config.head != model::HeadType::kTransformer) return 0;
  const model::TransformerHeadConfig& t = config.transformer;
  const model::attention::AttentionOptions& a = t.attention;
  const auto n = static_cast<double>(frames + (t.pooling == model::Pooling::kCls ? 1 : 0));
  const auto e = static_cast<double>(t.d_model / t.num_heads);
  double per_head = 0;
  using model::attention::AttentionType;
  const double linear = 4 * n * e * e + 4 * n * e;
  const double clusters = std::min(static_cast<double>(a.clusters), n);
  const double clustered = 2 * n * static_cast<double>(a.hash_bits) * e +
                           2 * static_cast<double>(a.lloyd_iterations) * n * clusters *
                               static_cast<double>(a.hash_bits) +
                           4 * clusters * n * e;
  switch (a.type) {
    case AttentionType::kSoftmax:
      per_head = 4 * n * n * e;
      break;
    case AttentionType::kLinear:
    case AttentionType::kCausalLinear:
      per_head = linear;
      break;
    case AttentionType::kCosformer:
      per_head = 2 * linear;
      break;
    case AttentionType::kLinformer: {
      const double k = static_cast<double>(a.linformer_k);
      per_head = 4 * k * n * e + 4 * n * k * e;
      break;
    }
    case AttentionType::kNystrom: {
      const double m = std::min(static_cast<double>(a.nystrom_landmarks), n);
      per_head = 4 * n * m * e + 2 * m * m * e +
                 8 * static_cast<double>(a.nystrom_pinv_iterations) * m * m * m + 2 * m * n * e;
      break;
    }
    case AttentionType::kClustered:
      per_head = clustered;
      break;
    case AttentionType::kImprovedClustered:
      per_head = clustered + 4 * n * std::min(static_cast<double>(a.topk), n) * e;
      break;
  }
  return per_head * static_cast<double>(t.num_heads) * static_cast<double>(t.num_layers);
}

}  // namespace vidclf::train
