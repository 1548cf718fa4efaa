#include "model/attention/improved_clustered_attention.h"

#include <gtest/gtest.h>

#include <functional>
#include <utility>
#include <vector>

#include "model/attention/clustered_attention.h"
#include "tests/model/attention/reference.h"

namespace vidclf::model::attention {
namespace {

using testing::MaxAbs;

AttentionOptions ImprovedOptions(int64_t clusters, int64_t topk) {
  AttentionOptions options;
  options.type = "improved-clustered";
  options.head_dim = 4;
  options.value_dim = 3;
  options.parameters["clusters"] = clusters;
  options.parameters["topk"] = topk;
  options.seed = 11;
  return options;
}

// With V = I_S [B, H, S, S] a mechanism's output is its attention matrix.
torch::Tensor AttentionMatrix(AttentionMechanism& attention, const torch::Tensor& q,
                              const torch::Tensor& k, const torch::Tensor& mask) {
  const torch::Tensor identity =
      torch::eye(k.size(2), k.options()).expand({k.size(0), k.size(1), k.size(2), k.size(2)});
  return attention.forward(q, k, identity, mask);
}

struct Inputs {
  torch::Tensor q, k, v, mask;
};

Inputs RandomInputs(int64_t seed) {
  torch::manual_seed(seed);
  return {torch::randn({2, 2, 24, 4}, torch::kFloat64),
          torch::randn({2, 2, 24, 4}, torch::kFloat64),
          torch::randn({2, 2, 24, 3}, torch::kFloat64), testing::LengthMask({24, 15}, 24)};
}

TEST(ImprovedClusteredAttention, WithEveryKeyInTheTopKEqualsSoftmaxForAnyClustering) {
  const Inputs in = RandomInputs(1);
  const torch::Tensor expected = testing::NaiveSoftmaxAttention(in.q, in.k, in.v, in.mask, 0.5);
  for (const int64_t topk : {24, 100}) {  // the second sequence has only 15 real keys
    for (const int64_t clusters : {1, 3}) {
      const torch::Tensor out = ImprovedClusteredAttention(ImprovedOptions(clusters, topk))
                                    .forward(in.q, in.k, in.v, in.mask);
      EXPECT_LT(MaxAbs(out - expected), 1e-12) << clusters << " clusters, k = " << topk;
    }
  }
  // Only the second sequence has all its real keys in a top-15.
  const torch::Tensor out =
      ImprovedClusteredAttention(ImprovedOptions(3, 15)).forward(in.q, in.k, in.v, in.mask);
  EXPECT_LT(MaxAbs(out[1] - expected[1]), 1e-12);
}

// The gathered top keys carry gradients to the queries, keys and values as softmax would, when
// they are all the keys.
TEST(ImprovedClusteredAttention, WithEveryKeyInTheTopKItsGradientsAreSoftmaxs) {
  const Inputs in = RandomInputs(5);
  const torch::Tensor weight = torch::randn_like(in.v);
  auto gradients = [&](const std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&,
                                                         const torch::Tensor&)>& attend) {
    std::vector<torch::Tensor> qkv = {in.q.clone().requires_grad_(), in.k.clone().requires_grad_(),
                                      in.v.clone().requires_grad_()};
    (attend(qkv[0], qkv[1], qkv[2]) * weight).sum().backward();
    return std::vector<torch::Tensor>{qkv[0].grad(), qkv[1].grad(), qkv[2].grad()};
  };
  ImprovedClusteredAttention attention(ImprovedOptions(3, 24));
  const std::vector<torch::Tensor> improved =
      gradients([&](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
        return attention.forward(q, k, v, in.mask);
      });
  const std::vector<torch::Tensor> softmax =
      gradients([&](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
        return testing::NaiveSoftmaxAttention(q, k, v, in.mask, 0.5);
      });
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_GT(MaxAbs(softmax[i]), 1e-3) << "q, k, v"[3 * i];
    EXPECT_LT(MaxAbs(improved[i] - softmax[i]), 1e-12) << "q, k, v"[3 * i];
  }
}

TEST(ImprovedClusteredAttention, IsNeverFartherFromSoftmaxThanClusteredPerQuery) {
  for (const int64_t seed : {2, 3, 4}) {
    const Inputs in = RandomInputs(seed);
    const torch::Tensor exact =
        AttentionMatrix(*std::make_shared<ImprovedClusteredAttention>(ImprovedOptions(100, 100)),
                        in.q, in.k, in.mask);
    for (const int64_t topk : {1, 4}) {
      ClusteredAttention clustered(ImprovedOptions(3, topk));  // the same clustering: same seed
      ImprovedClusteredAttention improved(ImprovedOptions(3, topk));
      const torch::Tensor a_c = AttentionMatrix(clustered, in.q, in.k, in.mask);
      const torch::Tensor a_t = AttentionMatrix(improved, in.q, in.k, in.mask);
      // Proposition 2, per real query: ||A^t_i - A_i||_1 <= ||A^c_c(i) - A_i||_1.
      const torch::Tensor gap = (a_t - exact).abs().sum(-1) - (a_c - exact).abs().sum(-1);
      EXPECT_LE(gap[0].max().item<double>(), 1e-12) << "seed " << seed << ", k = " << topk;
      EXPECT_LE(gap[1].slice(1, 0, 15).max().item<double>(), 1e-12);
      // With k = 1, A^t = A^c (the one top key keeps the cluster's mass); with more, better.
      if (topk > 1) {
        EXPECT_LT(gap.slice(2, 0, 15).sum().item<double>(), -1e-3);
      }
      // Rows sum to one; padded keys get no weight.
      EXPECT_LT(MaxAbs(a_t.sum(-1) - 1), 1e-12);
      EXPECT_EQ(MaxAbs(a_t[1].slice(2, 15)), 0);
      // A^t differs from A^c_c(i) only on the cluster's top-k keys of A^c.
      const torch::Tensor top = std::get<1>(a_c.topk(topk, -1));
      EXPECT_LT(MaxAbs((a_t - a_c).scatter(-1, top, 0.0)), 1e-12);
    }
  }
}

TEST(ImprovedClusteredAttention, CpuInferenceLoopEqualsTheDifferentiableGather) {
  // Inputs without gradients take the CPU loop; the same inputs requiring gradients take the
  // tensor formulation that also runs on GPUs. Sequence 1 has 15 real keys: k = 20 includes
  // padded ones; a single cluster with 40 queries; and float32.
  for (const int64_t seed : {7, 8}) {
    const Inputs in = RandomInputs(seed);
    for (const auto& [clusters, topk] :
         std::vector<std::pair<int64_t, int64_t>>{{3, 1}, {3, 5}, {5, 20}, {1, 7}}) {
      ImprovedClusteredAttention attention(ImprovedOptions(clusters, topk));
      const torch::Tensor loop = attention.forward(in.q, in.k, in.v, in.mask);
      const torch::Tensor gather =
          attention.forward(in.q.clone().requires_grad_(), in.k, in.v, in.mask).detach();
      EXPECT_LT(MaxAbs(loop - gather), 1e-12)
          << "seed " << seed << ", " << clusters << " clusters, k = " << topk;
      const torch::Tensor loop32 = attention.forward(
          in.q.to(torch::kFloat32), in.k.to(torch::kFloat32), in.v.to(torch::kFloat32), in.mask);
      EXPECT_LT(MaxAbs(loop32.to(torch::kFloat64) - gather), 1e-5);
    }
  }
}

TEST(ImprovedClusteredAttention, PaddingIsInvisibleAndBatchEqualsSingle) {
  torch::manual_seed(5);
  ImprovedClusteredAttention attention(ImprovedOptions(3, 2));
  testing::ExpectPaddingInvisibleAndBatchEqualsSingle(attention, /*head_dim=*/4);
}

TEST(ImprovedClusteredAttention, RunsInFloat32WithGradientsAndRejectsInvalidOptions) {
  torch::manual_seed(6);
  const torch::Tensor q = torch::randn({1, 2, 20, 4}, torch::requires_grad());
  const torch::Tensor v = torch::randn({1, 2, 20, 3}, torch::requires_grad());
  const torch::Tensor out = ImprovedClusteredAttention(ImprovedOptions(4, 3)).forward(q, q, v, {});
  EXPECT_EQ(out.scalar_type(), torch::kFloat32);
  out.pow(2).sum().backward();
  EXPECT_TRUE(torch::isfinite(q.grad()).all().item<bool>());
  EXPECT_GT(v.grad().abs().sum().item<double>(), 0);
  EXPECT_THROW(ImprovedClusteredAttention(ImprovedOptions(4, 0)), c10::Error);
  EXPECT_THROW(ImprovedClusteredAttention(ImprovedOptions(0, 4)), c10::Error);
}

}  // namespace
}  // namespace vidclf::model::attention
