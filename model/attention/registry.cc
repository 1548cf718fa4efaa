#include "model/attention/registry.h"

#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "model/attention/causal_linear_attention.h"
#include "model/attention/clustered_attention.h"
#include "model/attention/cosformer_attention.h"
#include "model/attention/improved_clustered_attention.h"
#include "model/attention/linear_attention.h"
#include "model/attention/linformer_attention.h"
#include "model/attention/nystrom_attention.h"
#include "model/attention/softmax_attention.h"

namespace vidclf::model::attention {
namespace {

using Factory = std::function<std::shared_ptr<AttentionMechanism>(const AttentionOptions&)>;

template <typename Mechanism>
std::pair<AttentionType, Factory> Entry(AttentionType type) {
  return {type, [](const AttentionOptions& options) -> std::shared_ptr<AttentionMechanism> {
            return std::make_shared<Mechanism>(options);
          }};
}

const std::vector<std::pair<AttentionType, Factory>>& Table() {
  static const auto* table = new std::vector<std::pair<AttentionType, Factory>>{
      Entry<SoftmaxAttention>(AttentionType::kSoftmax),
      Entry<LinearAttention>(AttentionType::kLinear),
      Entry<CausalLinearAttention>(AttentionType::kCausalLinear),
      Entry<CosformerAttention>(AttentionType::kCosformer),
      Entry<LinformerAttention>(AttentionType::kLinformer),
      Entry<NystromAttention>(AttentionType::kNystrom),
      Entry<ClusteredAttention>(AttentionType::kClustered),
      Entry<ImprovedClusteredAttention>(AttentionType::kImprovedClustered),
  };
  return *table;
}

}  // namespace

absl::StatusOr<std::shared_ptr<AttentionMechanism>> MakeAttention(const AttentionOptions& options) {
  for (const auto& [type, factory] : Table()) {
    if (type != options.type) continue;
    try {
      return factory(options);
    } catch (const c10::Error& e) {
      return absl::InvalidArgumentError(absl::StrCat("attention \"", AttentionTypeName(type),
                                                     "\": ", e.what_without_backtrace()));
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("no attention mechanism is registered for ", AttentionTypeName(options.type)));
}

}  // namespace vidclf::model::attention
