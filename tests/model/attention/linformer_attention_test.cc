#include "model/attention/linformer_attention.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "tests/model/attention/reference.h"

namespace vidclf::model::attention {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

AttentionOptions LinformerOptions(int64_t k, int64_t max_length) {
  AttentionOptions options;
  options.type = "linformer";
  options.head_dim = 4;
  options.value_dim = 3;
  options.parameters["linformer_k"] = k;
  options.max_length = max_length;
  return options;
}

void SetProjections(LinformerAttention& attention, const torch::Tensor& e, const torch::Tensor& f) {
  torch::NoGradGuard no_grad;
  attention.key_projection.copy_(e);
  attention.value_projection.copy_(f);
}

TEST(LinformerAttention, IdentityOrPermutationProjectionsEqualSoftmax) {
  torch::manual_seed(1);
  LinformerAttention attention(LinformerOptions(/*k=*/6, /*max_length=*/6));
  const torch::Tensor q = torch::randn({2, 2, 5, 4}, torch::kFloat64);
  const torch::Tensor k = torch::randn({2, 2, 6, 4}, torch::kFloat64);
  const torch::Tensor v = torch::randn({2, 2, 6, 3}, torch::kFloat64);
  const torch::Tensor expected = testing::NaiveSoftmaxAttention(q, k, v, {}, 0.5);
  const torch::Tensor identity = torch::eye(6);
  const torch::Tensor permutation = identity.index_select(0, torch::randperm(6));
  for (const torch::Tensor& p : {identity, permutation}) {
    SetProjections(attention, p, p);
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(torch::allclose(attention.forward(q, k, v, {}), expected, 1e-6, 1e-6));
  }
}

TEST(LinformerAttention, ShorterInputUsesTheFirstColumnsAndRowsAreStochastic) {
  torch::manual_seed(2);
  LinformerAttention attention(LinformerOptions(/*k=*/3, /*max_length=*/8));
  torch::NoGradGuard no_grad;
  const torch::Tensor q = torch::randn({1, 2, 5, 4}, torch::kFloat64);
  const torch::Tensor k = torch::randn({1, 2, 5, 4}, torch::kFloat64);
  const torch::Tensor v = torch::randn({1, 2, 5, 3}, torch::kFloat64);
  const torch::Tensor e = attention.key_projection.slice(1, 0, 5).to(torch::kFloat64);
  const torch::Tensor f = attention.value_projection.slice(1, 0, 5).to(torch::kFloat64);
  const torch::Tensor weights =
      torch::softmax(torch::matmul(q, torch::matmul(e, k).transpose(-2, -1)) * 0.5, -1);
  EXPECT_TRUE(torch::allclose(attention.forward(q, k, v, {}),
                              torch::matmul(weights, torch::matmul(f, v)), 1e-10, 1e-10));
  // With F = 1/S every projected value is the mean of V; rows of weights sum to 1, so every output
  // is that mean (to float32 accuracy: F is a float32 parameter).
  SetProjections(attention, attention.key_projection, torch::full({3, 8}, 0.2));
  const torch::Tensor mean = v.mean(2, /*keepdim=*/true).expand({1, 2, 5, 3});
  EXPECT_TRUE(torch::allclose(attention.forward(q, k, v, {}), mean, 1e-6, 1e-6));
}

TEST(LinformerAttention, RejectsInputsLongerThanMaxLengthNamingBothLengths) {
  LinformerAttention attention(LinformerOptions(/*k=*/3, /*max_length=*/6));
  const torch::Tensor q = torch::randn({1, 1, 7, 4});
  const torch::Tensor v = torch::randn({1, 1, 7, 3});
  try {
    attention.forward(q, q, v, {});
    FAIL() << "expected c10::Error";
  } catch (const c10::Error& e) {
    EXPECT_THAT(e.what_without_backtrace(), AllOf(HasSubstr("7"), HasSubstr("max_length = 6")));
  }
}

TEST(LinformerAttention, PaddingIsInvisibleAndBatchEqualsSingle) {
  torch::manual_seed(3);
  LinformerAttention attention(LinformerOptions(/*k=*/3, /*max_length=*/9));
  testing::ExpectPaddingInvisibleAndBatchEqualsSingle(attention, /*head_dim=*/4);
}

TEST(LinformerAttention, ProjectionsAreLearnedParametersWithJlInitialisation) {
  torch::manual_seed(4);
  LinformerAttention attention(LinformerOptions(/*k=*/16, /*max_length=*/512));
  const auto named = attention.named_parameters();
  ASSERT_EQ(named.size(), 2u);
  EXPECT_EQ(named["key_projection"].sizes(), (std::vector<int64_t>{16, 512}));
  EXPECT_EQ(named["value_projection"].sizes(), (std::vector<int64_t>{16, 512}));
  EXPECT_NEAR(attention.key_projection.var().item<double>(), 1.0 / 16, 0.1 / 16);
  EXPECT_NEAR(attention.value_projection.mean().item<double>(), 0, 0.01);
  // float32 inputs train E and F.
  const torch::Tensor x = torch::randn({1, 2, 10, 4});
  attention.forward(x, x, torch::randn({1, 2, 10, 3}), {}).pow(2).sum().backward();
  EXPECT_GT(attention.key_projection.grad().abs().sum().item<double>(), 0);
  EXPECT_GT(attention.value_projection.grad().slice(1, 0, 10).abs().sum().item<double>(), 0);
  EXPECT_EQ(attention.value_projection.grad().slice(1, 10).abs().sum().item<double>(), 0);
}

// Mean over kSeeds draws of ||linformer - softmax||_F / ||softmax||_F for n = 256 keys of width
// 32, with E = F = one Gaussian matrix G, G_ij ~ N(0, 1/k). Each draw's q, k, v depend on the seed
// only, so every k is measured on the same inputs and the comparison between k is paired.
double MeanRelativeErrorToSoftmax(int64_t k, uint64_t base_seed) {
  constexpr int64_t kLength = 256, kWidth = 32, kSeeds = 8;
  AttentionOptions options;
  options.type = "linformer";
  options.head_dim = kWidth;
  options.value_dim = kWidth;
  options.parameters["linformer_k"] = k;
  options.max_length = kLength;
  LinformerAttention attention(options);
  torch::NoGradGuard no_grad;
  double total = 0;
  for (int64_t seed = 0; seed < kSeeds; ++seed) {
    torch::manual_seed(base_seed + seed);
    const torch::Tensor q = torch::randn({1, 2, kLength, kWidth}, torch::kFloat64);
    const torch::Tensor keys = torch::randn({1, 2, kLength, kWidth}, torch::kFloat64);
    const torch::Tensor v = torch::randn({1, 2, kLength, kWidth}, torch::kFloat64);
    const torch::Tensor g = torch::randn({k, kLength}) / std::sqrt(static_cast<double>(k));
    SetProjections(attention, g, g);
    const torch::Tensor expected =
        testing::NaiveSoftmaxAttention(q, keys, v, {}, 1 / std::sqrt(static_cast<double>(kWidth)));
    total += (attention.forward(q, keys, v, {}) - expected).norm().item<double>() /
             expected.norm().item<double>();
  }
  return total / kSeeds;
}

// Reference summary: with E = F having N(0, 1/k) entries, the error to softmax attention does not
// increase as k grows. Averaged over seeds so that one unlucky projection cannot flip the order.
// Measured: about 29, 7.8 and 1.23 for k = 16, 64, 256, the same to a few percent for other base
// seeds. All exceed 1 (the error of an all-zero output): on random inputs with a Gaussian rather
// than orthogonal E, Linformer is no close approximation at these k; only the order is claimed.
TEST(LinformerAttention, ErrorToSoftmaxDoesNotIncreaseWithK) {
  const double error16 = MeanRelativeErrorToSoftmax(16, /*base_seed=*/100);
  const double error64 = MeanRelativeErrorToSoftmax(64, /*base_seed=*/100);
  const double error256 = MeanRelativeErrorToSoftmax(256, /*base_seed=*/100);
  EXPECT_GE(error16, error64);
  EXPECT_GE(error64, error256);
}

TEST(LinformerAttention, RejectsInvalidOptions) {
  EXPECT_THROW(LinformerAttention(LinformerOptions(/*k=*/0, /*max_length=*/8)), c10::Error);
  EXPECT_THROW(LinformerAttention(LinformerOptions(/*k=*/4, /*max_length=*/0)), c10::Error);
}

}  // namespace
}  // namespace vidclf::model::attention
