#include "model/attention/registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace vidclf::model::attention {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(AttentionRegistry, EveryMechanismBuildsAndIsFoundByItsName) {
  EXPECT_THAT(AttentionNames(),
              ElementsAre("softmax", "linear", "causal-linear", "cosformer", "linformer", "nystrom",
                          "clustered", "improved-clustered"));
  for (const AttentionSpec* spec : AttentionSpecs()) {
    const absl::StatusOr<const AttentionSpec*> found = FindAttention(spec->name);
    ASSERT_TRUE(found.ok()) << spec->name << ": " << found.status();
    EXPECT_EQ(*found, spec);
    EXPECT_FALSE(spec->summary.empty()) << spec->name;
    AttentionOptions options;
    options.type = spec->name;
    const auto attention = MakeAttention(options);
    EXPECT_TRUE(attention.ok()) << spec->name << ": " << attention.status();
    EXPECT_GT(spec->flops_per_head(16, 8, options), 0) << spec->name;
  }
}

// Recurrence is part of the mechanism's interface: causal-linear alone has a recurrent form, and
// the others refuse to step with a message that says to use a sliding window.
TEST(AttentionRegistry, OnlyCausalLinearHasARecurrentForm) {
  for (const std::string& name : AttentionNames()) {
    AttentionOptions options;
    options.type = name;
    options.head_dim = options.value_dim = 4;
    options.num_heads = 2;
    const auto attention = MakeAttention(options);
    ASSERT_TRUE(attention.ok()) << name << ": " << attention.status();
    EXPECT_EQ((*attention)->has_recurrent_form(), name == "causal-linear") << name;
    if (name == "causal-linear") continue;
    const torch::Tensor x = torch::randn({1, 2, 3, 4});
    try {
      (*attention)->forward_chunk(x, x, x, AttentionState{});
      ADD_FAILURE() << name << " stepped without a recurrent form";
    } catch (const c10::Error& e) {
      EXPECT_THAT(e.what_without_backtrace(), HasSubstr("sliding window")) << name;
    }
  }
}

TEST(AttentionRegistry, SpecsSayWhatTheMechanismsDo) {
  for (const AttentionSpec* spec : AttentionSpecs()) {
    AttentionOptions options;
    options.type = spec->name;
    EXPECT_EQ(IsCausal(*spec, options), spec->name == "causal-linear") << spec->name;
    EXPECT_EQ(spec->substitutable, spec->name != "linformer") << spec->name;
    EXPECT_EQ(spec->bounded_by_max_length, spec->name == "linformer") << spec->name;
  }
  // Softmax's cost is quadratic in the positions; the linear-time ones' is not.
  const AttentionOptions options;
  const AttentionSpec& softmax = **FindAttention("softmax");
  const AttentionSpec& linear = **FindAttention("linear");
  EXPECT_DOUBLE_EQ(softmax.flops_per_head(200, 8, options),
                   4 * softmax.flops_per_head(100, 8, options));
  EXPECT_DOUBLE_EQ(linear.flops_per_head(200, 8, options),
                   2 * linear.flops_per_head(100, 8, options));
}

TEST(AttentionRegistry, ParametersTakeTheirDefaultsUnlessSet) {
  const absl::StatusOr<AttentionParameter> clusters = FindAttentionParameter("clusters");
  ASSERT_TRUE(clusters.ok()) << clusters.status();
  AttentionOptions options;
  EXPECT_EQ(clusters->Of(options), 100);
  options.parameters["clusters"] = 7;
  EXPECT_EQ(clusters->Of(options), 7);
  // Shared by clustered and improved-clustered, listed once.
  int listed = 0;
  for (const AttentionParameter& parameter : AttentionParameters()) {
    listed += absl::string_view(parameter.key) == "clusters";
  }
  EXPECT_EQ(listed, 1);
  const absl::StatusOr<AttentionParameter> unknown = FindAttentionParameter("clustres");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unknown.status().message()),
              AllOf(HasSubstr("\"clustres\""), HasSubstr("clusters"), HasSubstr("linformer_k")));
}

TEST(AttentionRegistry, UnknownNameIsInvalidArgumentListingTheKnownNames) {
  const absl::StatusOr<const AttentionSpec*> spec = FindAttention("performer");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("\"performer\""));
  for (const std::string& known : AttentionNames()) {
    EXPECT_THAT(std::string(spec.status().message()), HasSubstr(known));
  }
  AttentionOptions options;
  options.type = "performer";
  EXPECT_EQ(MakeAttention(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(AttentionRegistry, RefusesATakenNameAClashingParameterAndAMissingFunction) {
  AttentionSpec spec = **FindAttention("softmax");
  absl::Status status = RegisterAttention(spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("registered already"));

  spec.name = "softmax-with-clusters";
  spec.parameters = {AttentionParameter{"clusters", 5, "clusters"}};
  status = RegisterAttention(spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("\"clusters\""), HasSubstr("default 5"), HasSubstr("has 100")));

  spec.parameters.clear();
  spec.make = nullptr;
  EXPECT_EQ(RegisterAttention(spec).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(FindAttention("softmax-with-clusters").ok());
}

TEST(AttentionRegistry, BadOptionsAreInvalidArgumentNamingTheOption) {
  AttentionOptions options;
  options.type = "cosformer";
  options.max_length = 0;
  const auto attention = MakeAttention(options);
  ASSERT_FALSE(attention.ok());
  EXPECT_EQ(attention.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(attention.status().message()), HasSubstr("max_length"));
}

TEST(AttentionRegistry, ExactMechanismsReturnTheRightShape) {
  torch::manual_seed(41);
  const torch::Tensor q = torch::randn({2, 3, 6, 4}), k = torch::randn({2, 3, 6, 4});
  const torch::Tensor v = torch::randn({2, 3, 6, 5});
  const torch::Tensor mask = torch::ones({2, 6}, torch::kBool);
  for (const std::string name : {"softmax", "linear", "causal-linear", "cosformer"}) {
    AttentionOptions options;
    options.type = name;
    options.head_dim = 4;
    options.value_dim = 5;
    options.num_heads = 3;
    const auto attention = MakeAttention(options);
    ASSERT_TRUE(attention.ok()) << name << ": " << attention.status();
    const torch::Tensor out = (*attention)->forward(q, k, v, mask);
    EXPECT_EQ(out.sizes(), (std::vector<int64_t>{2, 3, 6, 5})) << name;
    EXPECT_TRUE(torch::isfinite(out).all().item<bool>()) << name;
  }
}

}  // namespace
}  // namespace vidclf::model::attention
