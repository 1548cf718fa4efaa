// Builds an attention mechanism from its name: one explicit table, so an unknown name fails when
// the model's configuration is read, with the list of names that exist.
#ifndef VIDCLF_MODEL_ATTENTION_REGISTRY_H_
#define VIDCLF_MODEL_ATTENTION_REGISTRY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/attention/attention.h"

namespace vidclf::model::attention {

// The registered names, in a fixed order.
std::vector<std::string> AttentionTypes();

// INVALID_ARGUMENT for an unknown type ("unknown attention type \"x\"; known: softmax, ...") or
// options the mechanism cannot use (the message names the option).
absl::StatusOr<std::shared_ptr<AttentionMechanism>> MakeAttention(const AttentionOptions& options);

}  // namespace vidclf::model::attention

#endif  // VIDCLF_MODEL_ATTENTION_REGISTRY_H_
