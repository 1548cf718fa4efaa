#include "model/attention/registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace vidclf::model::attention {
namespace {

using ::testing::HasSubstr;

TEST(AttentionRegistry, EveryTypeBuildsAndItsNameParsesBack) {
  EXPECT_EQ(AttentionTypes().size(), 8u);
  for (const AttentionType type : AttentionTypes()) {
    const std::string name = AttentionTypeName(type);
    const absl::StatusOr<AttentionType> parsed = ParseAttentionType(name);
    ASSERT_TRUE(parsed.ok()) << name << ": " << parsed.status();
    EXPECT_EQ(*parsed, type) << name;
    AttentionOptions options;
    options.type = type;
    const auto attention = MakeAttention(options);
    EXPECT_TRUE(attention.ok()) << name << ": " << attention.status();
  }
}

// Recurrence is part of the mechanism's interface: causal-linear alone has a recurrent form, and
// the others refuse to step with a message that says to use a sliding window.
TEST(AttentionRegistry, OnlyCausalLinearHasARecurrentForm) {
  for (const AttentionType type : AttentionTypes()) {
    const std::string name = AttentionTypeName(type);
    AttentionOptions options;
    options.type = type;
    options.head_dim = options.value_dim = 4;
    options.num_heads = 2;
    const auto attention = MakeAttention(options);
    ASSERT_TRUE(attention.ok()) << name << ": " << attention.status();
    EXPECT_EQ((*attention)->has_recurrent_form(), type == AttentionType::kCausalLinear) << name;
    if (type == AttentionType::kCausalLinear) continue;
    const torch::Tensor x = torch::randn({1, 2, 3, 4});
    try {
      (*attention)->forward_chunk(x, x, x, AttentionState{});
      ADD_FAILURE() << name << " stepped without a recurrent form";
    } catch (const c10::Error& e) {
      EXPECT_THAT(e.what_without_backtrace(), HasSubstr("sliding window")) << name;
    }
  }
}

TEST(AttentionRegistry, UnknownNameIsInvalidArgumentListingTheKnownNames) {
  const absl::StatusOr<AttentionType> type = ParseAttentionType("performer");
  ASSERT_FALSE(type.ok());
  EXPECT_EQ(type.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(type.status().message()), HasSubstr("\"performer\""));
  for (const AttentionType known : AttentionTypes()) {
    EXPECT_THAT(std::string(type.status().message()), HasSubstr(AttentionTypeName(known)));
  }
}

TEST(AttentionRegistry, BadOptionsAreInvalidArgumentNamingTheOption) {
  AttentionOptions options;
  options.type = AttentionType::kCosformer;
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
    options.type = *ParseAttentionType(name);
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
