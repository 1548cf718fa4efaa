#include "model/attention/causal_linear_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tests/model/attention/reference.h"

namespace vidclf::model::attention {
namespace {

using testing::MaxAbs;
using testing::MaxAbsDiff;

using testing::LengthMask;
using testing::NaiveNormalizedAttention;

CausalLinearAttention MakeCausal() { return CausalLinearAttention(AttentionOptions{}); }

torch::Tensor Phi(const torch::Tensor& x) { return torch::elu(x) + 1; }

// Longer than one block of the blockwise prefix sums, and not a multiple of it.
constexpr int64_t kLength = kCausalLinearBlock + 13;

TEST(CausalLinearAttention, EqualsTheMaskedQuadraticReference) {
  torch::manual_seed(21);
  const auto f64 = torch::kDouble;
  const torch::Tensor q = torch::randn({2, 2, kLength, 4}, f64);
  const torch::Tensor k = torch::randn({2, 2, kLength, 4}, f64);
  const torch::Tensor v = torch::randn({2, 2, kLength, 5}, f64);
  const torch::Tensor mask = LengthMask({kLength, 30}, kLength);
  const torch::Tensor expected = NaiveNormalizedAttention(
      torch::matmul(Phi(q), Phi(k).transpose(-2, -1)), v, mask, AttentionOptions{}.epsilon, true);
  EXPECT_LE(MaxAbsDiff(MakeCausal().forward(q, k, v, mask), expected), 1e-10);
  const torch::Tensor out32 =
      MakeCausal().forward(q.to(torch::kFloat), k.to(torch::kFloat), v.to(torch::kFloat), mask);
  EXPECT_TRUE(torch::allclose(out32.to(f64), expected, 1e-5, 1e-6));
}

TEST(CausalLinearAttention, OutputIDependsOnPositionsUpToIOnly) {
  torch::manual_seed(22);
  const torch::Tensor q = torch::randn({1, 2, kLength, 4}, torch::kDouble);
  const torch::Tensor k = torch::randn({1, 2, kLength, 4}, torch::kDouble);
  const torch::Tensor v = torch::randn({1, 2, kLength, 3}, torch::kDouble);
  const torch::Tensor out = MakeCausal().forward(q, k, v, torch::Tensor());
  for (const int64_t i : {int64_t{0}, int64_t{5}, kCausalLinearBlock - 1, kCausalLinearBlock}) {
    const auto perturb = [&](const torch::Tensor& x) {
      return torch::cat({x.slice(2, 0, i + 1), 100 * torch::randn_like(x.slice(2, i + 1))}, 2);
    };
    const torch::Tensor changed =
        MakeCausal().forward(perturb(q), perturb(k), perturb(v), torch::Tensor());
    EXPECT_LE(MaxAbsDiff(changed.slice(2, 0, i + 1), out.slice(2, 0, i + 1)), 1e-12) << "i " << i;
  }
}

TEST(CausalLinearAttention, ChunksWithCarriedStateEqualTheParallelForm) {
  torch::manual_seed(23);
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    const torch::Tensor q = torch::randn({2, 2, kLength, 4}, dtype);
    const torch::Tensor k = torch::randn({2, 2, kLength, 4}, dtype);
    const torch::Tensor v = torch::randn({2, 2, kLength, 3}, dtype);
    CausalLinearAttention attention = MakeCausal();
    const torch::Tensor parallel = attention.forward(q, k, v, torch::Tensor());
    for (const int64_t chunk : {int64_t{1}, int64_t{3}, int64_t{7}, kLength}) {
      AttentionState state;
      std::vector<torch::Tensor> outputs;
      for (int64_t start = 0; start < kLength; start += chunk) {
        const int64_t end = std::min(start + chunk, kLength);
        auto [out, next] = attention.forward_chunk(q.slice(2, start, end), k.slice(2, start, end),
                                                   v.slice(2, start, end), state);
        outputs.push_back(out);
        state = next;
        // The state never grows with the length seen.
        EXPECT_EQ(state.s.sizes(), (std::vector<int64_t>{2, 2, 4, 3}));
        EXPECT_EQ(state.z.sizes(), (std::vector<int64_t>{2, 2, 4}));
      }
      const torch::Tensor streamed = torch::cat(outputs, 2);
      if (dtype == torch::kDouble) {
        EXPECT_LE(MaxAbsDiff(streamed, parallel), 1e-12) << "chunk " << chunk;
      } else {
        EXPECT_TRUE(torch::allclose(streamed, parallel, 1e-5, 1e-5)) << "chunk " << chunk;
      }
      // The final state is (sum phi(K) V^T, sum phi(K)).
      EXPECT_TRUE(torch::allclose(state.s, torch::matmul(Phi(k).transpose(-2, -1), v), 1e-5, 1e-5));
      EXPECT_TRUE(torch::allclose(state.z, Phi(k).sum(2), 1e-5, 1e-5));
    }
    // A zero state behaves like a fresh start.
    const AttentionState zero{torch::zeros({2, 2, 4, 3}, dtype), torch::zeros({2, 2, 4}, dtype)};
    EXPECT_TRUE(torch::allclose(attention.forward_chunk(q, k, v, zero).first, parallel));
  }
}

// The loss <out, weight>, so every output entry reaches the gradient with its own factor.
double WeightedLoss(CausalLinearAttention& attention, const std::vector<torch::Tensor>& qkv,
                    const torch::Tensor& mask, const torch::Tensor& weight) {
  return (attention.forward(qkv[0], qkv[1], qkv[2], mask) * weight).sum().item<double>();
}

// LibTorch's gradcheck, which C++ lacks, written out: autograd against central differences.
TEST(CausalLinearAttention, GradientsEqualCentralFiniteDifferences) {
  torch::manual_seed(24);
  constexpr double kStep = 1e-6;
  const auto f64 = torch::kDouble;
  CausalLinearAttention attention = MakeCausal();
  const torch::Tensor weight = torch::randn({1, 2, 6, 4}, f64);
  const std::vector<int64_t> widths = {3, 3, 4};  // E for q and k, M for v
  for (const torch::Tensor& mask : {torch::Tensor(), LengthMask({4}, 6)}) {
    std::vector<torch::Tensor> qkv;
    for (const int64_t width : widths) {
      qkv.push_back(torch::randn({1, 2, 6, width}, f64).requires_grad_());
    }
    (attention.forward(qkv[0], qkv[1], qkv[2], mask) * weight).sum().backward();
    torch::NoGradGuard no_grad;
    for (size_t which = 0; which < 3; ++which) {
      torch::Tensor numeric = torch::zeros_like(qkv[which]);
      for (int64_t i = 0; i < numeric.numel(); ++i) {
        const auto moved_loss = [&](double step) {
          std::vector<torch::Tensor> moved = {qkv[0].detach(), qkv[1].detach(), qkv[2].detach()};
          moved[which] = moved[which].clone();
          moved[which].data_ptr<double>()[i] += step;
          return WeightedLoss(attention, moved, mask, weight);
        };
        numeric.data_ptr<double>()[i] = (moved_loss(kStep) - moved_loss(-kStep)) / (2 * kStep);
      }
      const torch::Tensor& analytic = qkv[which].grad();
      EXPECT_TRUE(torch::allclose(analytic, numeric, 1e-6, 1e-6))
          << "input " << which << (mask.defined() ? " with" : " without") << " mask, max diff "
          << MaxAbsDiff(analytic, numeric);
      // Padded keys and values never reach the output, so their gradient is exactly zero.
      if (mask.defined() && which > 0) {
        EXPECT_EQ(MaxAbs(analytic.slice(2, 4)), 0) << "input " << which;
      }
    }
  }
}

TEST(CausalLinearAttention, GradientOfOutputIReachesPositionsUpToIOnly) {
  torch::manual_seed(25);
  // A sum rather than a max: the slices past the last position and before the first are empty.
  const auto abs_sum = [](const torch::Tensor& x) { return x.abs().sum().item<double>(); };
  for (int64_t i = 0; i < 6; ++i) {
    const torch::Tensor q = torch::randn({1, 2, 6, 3}, torch::kDouble).requires_grad_();
    const torch::Tensor k = torch::randn({1, 2, 6, 3}, torch::kDouble).requires_grad_();
    const torch::Tensor v = torch::randn({1, 2, 6, 4}, torch::kDouble).requires_grad_();
    MakeCausal().forward(q, k, v, torch::Tensor()).select(2, i).sum().backward();
    for (const torch::Tensor& x : {k, v}) {
      // Exactly zero, not small: a later key or value must not enter out_i at all.
      EXPECT_EQ(abs_sum(x.grad().slice(2, i + 1)), 0) << "i " << i;
      // Every position up to i does reach out_i, so the check above is not vacuous.
      EXPECT_TRUE((x.grad().slice(2, 0, i + 1).abs().sum({0, 1, 3}) > 0).all().item<bool>())
          << "i " << i;
    }
    EXPECT_EQ(abs_sum(q.grad().slice(2, 0, i)), 0) << "i " << i;
    EXPECT_EQ(abs_sum(q.grad().slice(2, i + 1)), 0) << "i " << i;
  }
}

TEST(CausalLinearAttention, RefusesABatchSizeChangeBetweenChunks) {
  CausalLinearAttention attention = MakeCausal();
  const AttentionState state =
      attention
          .forward_chunk(torch::randn({2, 1, 3, 4}), torch::randn({2, 1, 3, 4}),
                         torch::randn({2, 1, 3, 5}), AttentionState{})
          .second;
  try {
    attention.forward_chunk(torch::randn({3, 1, 3, 4}), torch::randn({3, 1, 3, 4}),
                            torch::randn({3, 1, 3, 5}), state);
    ADD_FAILURE() << "expected c10::Error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("batch size changed"), std::string::npos) << e.what();
  }
}

TEST(CausalLinearAttention, RejectsUnequalLengthsAndBadEpsilon) {
  EXPECT_THROW(MakeCausal().forward(torch::randn({1, 1, 3, 4}), torch::randn({1, 1, 5, 4}),
                                    torch::randn({1, 1, 5, 2}), torch::Tensor()),
               c10::Error);
  AttentionOptions options;
  options.epsilon = -1;
  EXPECT_THROW(CausalLinearAttention{options}, c10::Error);
}

}  // namespace
}  // namespace vidclf::model::attention
