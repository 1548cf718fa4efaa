// vidclf-train attention: the registry's description of every mechanism, as the docs' table
// (markdown) or for scripts such as the training comparison (json).
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json_text.h"
#include "model/attention/registry.h"
#include "train/commands.h"

namespace vidclf::train {
namespace {

using model::attention::AttentionParameter;
using model::attention::AttentionSpec;
using model::attention::Causality;

std::string CausalityName(Causality causality) {
  switch (causality) {
    case Causality::kNever:
      return "no";
    case Causality::kWhenAsked:
      return "when asked";
    case Causality::kAlways:
      return "always";
  }
  return "?";
}

nlohmann::json SpecToJson(const AttentionSpec& spec) {
  nlohmann::json parameters = nlohmann::json::array();
  for (const AttentionParameter& parameter : spec.parameters) {
    parameters.push_back({{"key", parameter.key},
                          {"default", parameter.default_value},
                          {"meaning", parameter.meaning}});
  }
  return {{"name", spec.name},
          {"summary", spec.summary},
          {"causal", CausalityName(spec.causality)},
          {"substitutable", spec.substitutable},
          {"bounded_by_max_length", spec.bounded_by_max_length},
          {"parameters", parameters}};
}

std::string SpecToMarkdownRow(const AttentionSpec& spec) {
  std::string parameters = "none";
  if (!spec.parameters.empty()) {
    parameters = absl::StrJoin(
        spec.parameters, ", ", [](std::string* out, const AttentionParameter& parameter) {
          absl::StrAppend(out, "`", parameter.key, "` ", parameter.default_value, " (",
                          parameter.meaning, ")");
        });
  }
  return absl::StrCat("| `", spec.name, "` | ", spec.summary, " | ", CausalityName(spec.causality),
                      " | ", spec.substitutable ? "yes" : "no", " | ", parameters, " |");
}

}  // namespace

void AddAttentionFlags(CLI::App* app, AttentionFlags* flags) {
  app->add_option("--format", flags->format, "markdown (the docs' table) or json.")
      ->capture_default_str()
      ->check(CLI::IsMember({"markdown", "json"}));
}

int RunAttention(const AttentionFlags& flags) {
  if (flags.format == "json") {
    nlohmann::json specs = nlohmann::json::array();
    for (const AttentionSpec* spec : model::attention::AttentionSpecs()) {
      specs.push_back(SpecToJson(*spec));
    }
    std::cout << JsonText(specs, 2) << "\n";
    return 0;
  }
  std::cout << "| mechanism | what it computes | causal | runs on weights trained with another | "
               "parameters (`head.attention` keys, defaults) |\n"
               "|---|---|---|---|---|\n";
  for (const AttentionSpec* spec : model::attention::AttentionSpecs()) {
    std::cout << SpecToMarkdownRow(*spec) << "\n";
  }
  return 0;
}

}  // namespace vidclf::train
