// What a mechanism says of itself: everything but its code that model.json validation,
// vidclf-train's help and cost figures, the substitution rules and the docs table need, so that
// these follow from the mechanism's own file.
#ifndef VIDCLF_MODEL_ATTENTION_ATTENTION_SPEC_H_
#define VIDCLF_MODEL_ATTENTION_ATTENTION_SPEC_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/attention/attention.h"

namespace vidclf::model::attention {

// Whether position i sees only keys j <= i.
enum class Causality {
  kNever,      // no causal form (linear refuses AttentionOptions::causal; the others ignore it)
  kWhenAsked,  // AttentionOptions::causal chooses
  kAlways,
};

struct AttentionSpec {
  // The name in model.json, requests, metrics and flags: "softmax", "causal-linear", ….
  std::string name;
  // One line for help texts and the docs table.
  std::string summary;
  Causality causality = Causality::kNever;
  // Whether a model trained with another mechanism may run this one on the same weights: true
  // where the mechanism has no weights of its own (Linformer's learned E and F make it false).
  bool substitutable = true;
  // Whether it refuses sequences longer than AttentionOptions::max_length (Linformer's fixed
  // projections), so that a streaming window must fit.
  bool bounded_by_max_length = false;
  // The AttentionOptions::parameters it reads.
  std::vector<AttentionParameter> parameters;
  // Floating-point operations per head and layer over n positions of width e per head, for the
  // training comparison's cost column.
  std::function<double(double n, double e, const AttentionOptions& options)> flops_per_head;
  // Builds it; throws c10::Error naming the option it cannot use.
  std::function<std::shared_ptr<AttentionMechanism>(const AttentionOptions& options)> make;
};

// A `make` for a mechanism whose constructor takes the options.
template <typename Mechanism>
std::shared_ptr<AttentionMechanism> Construct(const AttentionOptions& options) {
  return std::make_shared<Mechanism>(options);
}

}  // namespace vidclf::model::attention

#endif  // VIDCLF_MODEL_ATTENTION_ATTENTION_SPEC_H_
