// The attention mechanisms a transformer head can run: the built-in ones (one line each in
// registry.cc) and any a program registers, each found by name with its AttentionSpec.
#ifndef VIDCLF_MODEL_ATTENTION_REGISTRY_H_
#define VIDCLF_MODEL_ATTENTION_REGISTRY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/attention/attention.h"
#include "model/attention/attention_spec.h"

namespace vidclf::model::attention {

// Adds a mechanism beside the built-in ones. INVALID_ARGUMENT for a name already taken, a
// missing `make` or `flops_per_head`, or a parameter key another mechanism declares with a
// different default.
absl::Status RegisterAttention(AttentionSpec spec);

// Every mechanism: the built-in ones in the docs' order, then those registered later.
std::vector<const AttentionSpec*> AttentionSpecs();
// Every mechanism's name, in the order above.
std::vector<std::string> AttentionNames();

// INVALID_ARGUMENT for an unknown name, listing the known ones.
absl::StatusOr<const AttentionSpec*> FindAttention(absl::string_view name);

// Every parameter some mechanism declares, once each, in the order above.
std::vector<AttentionParameter> AttentionParameters();
// The parameter `key` as some mechanism declares it; INVALID_ARGUMENT listing the known keys.
absl::StatusOr<AttentionParameter> FindAttentionParameter(absl::string_view key);

// Whether `options` asks for causal attention, the mechanism's own or by AttentionOptions::causal.
bool IsCausal(const AttentionSpec& spec, const AttentionOptions& options);

// INVALID_ARGUMENT for an unknown type or options the mechanism cannot use (the message names
// the option).
absl::StatusOr<std::shared_ptr<AttentionMechanism>> MakeAttention(const AttentionOptions& options);

}  // namespace vidclf::model::attention

#endif  // VIDCLF_MODEL_ATTENTION_REGISTRY_H_
