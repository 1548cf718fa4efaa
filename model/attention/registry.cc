#include "model/attention/registry.h"

#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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
std::pair<std::string, Factory> Entry(const char* name) {
  return {name, [](const AttentionOptions& options) -> std::shared_ptr<AttentionMechanism> {
            return std::make_shared<Mechanism>(options);
          }};
}

const std::vector<std::pair<std::string, Factory>>& Table() {
  static const auto* table = new std::vector<std::pair<std::string, Factory>>{
      Entry<SoftmaxAttention>("softmax"),
      Entry<LinearAttention>("linear"),
      Entry<CausalLinearAttention>("causal-linear"),
      Entry<CosformerAttention>("cosformer"),
      Entry<LinformerAttention>("linformer"),
      Entry<NystromAttention>("nystrom"),
      Entry<ClusteredAttention>("clustered"),
      Entry<ImprovedClusteredAttention>("improved-clustered"),
  };
  return *table;
}

}  // namespace

std::vector<std::string> AttentionTypes() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : Table()) names.push_back(name);
  return names;
}

absl::StatusOr<std::shared_ptr<AttentionMechanism>> MakeAttention(const AttentionOptions& options) {
  for (const auto& [name, factory] : Table()) {
    if (name != options.type) continue;
    try {
      return factory(options);
    } catch (const c10::Error& e) {
      return absl::InvalidArgumentError(
          absl::StrCat("attention \"", name, "\": ", e.what_without_backtrace()));
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown attention type \"", options.type,
                   "\"; known: ", absl::StrJoin(AttentionTypes(), ", ")));
}

}  // namespace vidclf::model::attention
