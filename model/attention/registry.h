// Builds an attention mechanism from its type: one explicit table.
#ifndef VIDCLF_MODEL_ATTENTION_REGISTRY_H_
#define VIDCLF_MODEL_ATTENTION_REGISTRY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "model/attention/attention.h"

namespace vidclf::model::attention {

// INVALID_ARGUMENT for options the mechanism cannot use (the message names the option).
absl::StatusOr<std::shared_ptr<AttentionMechanism>> MakeAttention(const AttentionOptions& options);

}  // namespace vidclf::model::attention

#endif  // VIDCLF_MODEL_ATTENTION_REGISTRY_H_
