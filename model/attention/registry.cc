#include "model/attention/registry.h"

#include <algorithm>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
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

class Registry {
 public:
  // The built-in mechanisms, in the order the docs list them: a new one is a line here.
  Registry()
      : specs_{
            &SoftmaxAttentionSpec(),      &LinearAttentionSpec(),
            &CausalLinearAttentionSpec(), &CosformerAttentionSpec(),
            &LinformerAttentionSpec(),    &NystromAttentionSpec(),
            &ClusteredAttentionSpec(),    &ImprovedClusteredAttentionSpec(),
        } {}

  absl::Status Add(AttentionSpec spec) {
    if (spec.name.empty() || !spec.make || !spec.flops_per_head) {
      return absl::InvalidArgumentError(
          "an attention mechanism needs a name, a make function and a flops_per_head function");
    }
    absl::MutexLock lock(&mutex_);
    for (const AttentionSpec* known : specs_) {
      if (known->name == spec.name) {
        return absl::InvalidArgumentError(
            absl::StrCat("attention \"", spec.name, "\" is registered already"));
      }
      for (const AttentionParameter& theirs : known->parameters) {
        for (const AttentionParameter& mine : spec.parameters) {
          if (absl::string_view(theirs.key) == mine.key &&
              theirs.default_value != mine.default_value) {
            return absl::InvalidArgumentError(absl::StrCat(
                "attention \"", spec.name, "\" declares parameter \"", mine.key, "\" with default ",
                mine.default_value, ", where \"", known->name, "\" has ", theirs.default_value));
          }
        }
      }
    }
    // Never freed: callers keep pointers to the specs for the life of the process.
    specs_.push_back(new AttentionSpec(std::move(spec)));
    return absl::OkStatus();
  }

  std::vector<const AttentionSpec*> Specs() const {
    absl::MutexLock lock(&mutex_);
    return specs_;
  }

 private:
  mutable absl::Mutex mutex_;
  std::vector<const AttentionSpec*> specs_ ABSL_GUARDED_BY(mutex_);
};

Registry& TheRegistry() {
  static auto* registry = new Registry;
  return *registry;
}

}  // namespace

absl::Status RegisterAttention(AttentionSpec spec) { return TheRegistry().Add(std::move(spec)); }

std::vector<const AttentionSpec*> AttentionSpecs() { return TheRegistry().Specs(); }

std::vector<std::string> AttentionNames() {
  std::vector<std::string> names;
  for (const AttentionSpec* spec : AttentionSpecs()) names.push_back(spec->name);
  return names;
}

absl::StatusOr<const AttentionSpec*> FindAttention(absl::string_view name) {
  for (const AttentionSpec* spec : AttentionSpecs()) {
    if (spec->name == name) return spec;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown attention type \"", name, "\"; known: ", absl::StrJoin(AttentionNames(), ", ")));
}

std::vector<AttentionParameter> AttentionParameters() {
  std::vector<AttentionParameter> parameters;
  for (const AttentionSpec* spec : AttentionSpecs()) {
    for (const AttentionParameter& parameter : spec->parameters) {
      if (std::none_of(parameters.begin(), parameters.end(), [&](const AttentionParameter& known) {
            return absl::string_view(known.key) == parameter.key;
          })) {
        parameters.push_back(parameter);
      }
    }
  }
  return parameters;
}

absl::StatusOr<AttentionParameter> FindAttentionParameter(absl::string_view key) {
  std::vector<std::string> keys;
  for (const AttentionParameter& parameter : AttentionParameters()) {
    if (parameter.key == key) return parameter;
    keys.emplace_back(parameter.key);
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown attention parameter \"", key,
                                                 "\"; known: ", absl::StrJoin(keys, ", ")));
}

bool IsCausal(const AttentionSpec& spec, const AttentionOptions& options) {
  return options.causal || spec.causality == Causality::kAlways;
}

absl::StatusOr<std::shared_ptr<AttentionMechanism>> MakeAttention(const AttentionOptions& options) {
  absl::StatusOr<const AttentionSpec*> spec = FindAttention(options.type);
  if (!spec.ok()) return spec.status();
  try {
    return (*spec)->make(options);
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("attention \"", options.type, "\": ", e.what_without_backtrace()));
  }
}

}  // namespace vidclf::model::attention
