#include "model/attention/clustered_attention.h"

#include <gtest/gtest.h>

#include <vector>

#include "model/attention/clustering.h"
#include "tests/unit/attention/reference.h"

namespace vidclf::model::attention {
namespace {

using testing::MaxAbs;

// The Hamming K-means of clustering.h written as tensor operations, as it once ran: distances by
// |x| + |c| - 2 x.c, votes by a one-hot matmul. Codes [B, H, L, bits] 0/1, valid [B, L].
torch::Tensor TensorHammingKMeans(const torch::Tensor& codes, const torch::Tensor& valid,
                                  int64_t clusters, int64_t iterations) {
  const int64_t batch = codes.size(0), heads = codes.size(1), length = codes.size(2),
                bits = codes.size(3);
  auto nearest_centroid = [&](const torch::Tensor& centroids) {
    return (codes.sum(-1, true) + centroids.sum(-1).unsqueeze(-2) -
            2 * torch::matmul(codes, centroids.transpose(-2, -1)))
        .argmin(-1);
  };
  const torch::Tensor first = valid.to(torch::kLong).argmax(1);
  std::vector<torch::Tensor> chosen = {
      codes.gather(2, first.view({batch, 1, 1, 1}).expand({batch, heads, 1, bits}))};
  torch::Tensor nearest =
      torch::where(valid.view({batch, 1, length}), torch::full({1}, bits + 1.0, codes.options()),
                   torch::full({1}, -1.0, codes.options()));
  for (int64_t j = 1; j < clusters; ++j) {
    nearest = torch::minimum(nearest, (codes - chosen.back()).abs().sum(-1));
    const torch::Tensor farthest = nearest.argmax(-1);
    chosen.push_back(
        codes.gather(2, farthest.view({batch, heads, 1, 1}).expand({batch, heads, 1, bits})));
  }
  torch::Tensor centroids = torch::cat(chosen, 2);
  const torch::Tensor real = valid.view({batch, 1, length, 1}).to(codes.scalar_type());
  for (int64_t iteration = 0; iteration < iterations; ++iteration) {
    const torch::Tensor members =
        torch::one_hot(nearest_centroid(centroids), clusters).to(codes.scalar_type()) * real;
    const torch::Tensor size = members.sum(2).unsqueeze(-1);
    const torch::Tensor ones = 2 * torch::matmul(members.transpose(-2, -1), codes);
    centroids = torch::where(ones > size, torch::ones_like(centroids),
                             torch::where(ones < size, torch::zeros_like(centroids), centroids));
  }
  return nearest_centroid(centroids);
}

AttentionOptions Options(int64_t clusters, uint64_t seed = 0) {
  AttentionOptions options;
  options.type = AttentionType::kClustered;
  options.head_dim = 4;
  options.value_dim = 3;
  options.clusters = clusters;
  options.seed = seed;
  return options;
}

TEST(ClusteredAttention, SingletonClustersEqualSoftmax) {
  torch::manual_seed(1);
  const torch::Tensor q = torch::randn({2, 2, 9, 4}, torch::kFloat64);
  const torch::Tensor k = torch::randn({2, 2, 9, 4}, torch::kFloat64);
  const torch::Tensor v = torch::randn({2, 2, 9, 3}, torch::kFloat64);
  const torch::Tensor mask = testing::LengthMask({9, 6}, 9);
  const torch::Tensor expected = testing::NaiveSoftmaxAttention(q, k, v, mask, 0.5);
  // C = L; C = 100 > L; and C = 6, singleton only for the 6 real queries of the second sequence.
  for (const int64_t clusters : {9, 100}) {
    const torch::Tensor out = ClusteredAttention(Options(clusters)).forward(q, k, v, mask);
    EXPECT_LT(MaxAbs(out[0] - expected[0]), 1e-12) << clusters << " clusters";
    EXPECT_LT(MaxAbs(out[1].slice(1, 0, 6) - expected[1].slice(1, 0, 6)), 1e-12) << clusters;
  }
  const torch::Tensor out = ClusteredAttention(Options(6)).forward(q, k, v, mask);
  EXPECT_LT(MaxAbs(out[1].slice(1, 0, 6) - expected[1].slice(1, 0, 6)), 1e-12);
  EXPECT_GT(MaxAbs(out[0] - expected[0]), 1e-3);  // 9 queries, 6 clusters: approximate
}

TEST(ClusteredAttention, IdenticalOrDuplicatedQueriesEqualSoftmaxWithoutNaN) {
  torch::manual_seed(2);
  const torch::Tensor k = torch::randn({1, 2, 60, 4}, torch::kFloat64);
  const torch::Tensor v = torch::randn({1, 2, 60, 3}, torch::kFloat64);
  // All queries identical, and 3 distinct queries repeated 20 times with 20 clusters: most
  // clusters stay empty, and every non-empty one holds copies of one query.
  const torch::Tensor same = torch::randn({1, 2, 1, 4}, torch::kFloat64).expand({1, 2, 60, 4});
  const torch::Tensor repeated = torch::randn({1, 2, 3, 4}, torch::kFloat64).repeat({1, 1, 20, 1});
  for (const torch::Tensor& q : {same, repeated}) {
    const torch::Tensor out = ClusteredAttention(Options(20)).forward(q, k, v, {});
    EXPECT_TRUE(torch::isfinite(out).all().item<bool>());
    EXPECT_LT(MaxAbs(out - testing::NaiveSoftmaxAttention(q, k, v, {}, 0.5)), 1e-12);
  }
}

TEST(ClusteredAttention, QueriesOfOneClusterGetIdenticalOutputs) {
  torch::manual_seed(3);
  const AttentionOptions options = Options(5);
  const torch::Tensor q = torch::randn({1, 2, 40, 4}, torch::kFloat64);
  const torch::Tensor k = torch::randn({1, 2, 30, 4}, torch::kFloat64);
  const torch::Tensor v = torch::randn({1, 2, 30, 3}, torch::kFloat64);
  const QueryClusters clusters = ClusterQueries(q, QueryValidity(q, k, {}), options);
  ASSERT_EQ(clusters.num_clusters, 5);
  const torch::Tensor out = ClusteredAttention(options).forward(q, k, v, {});
  for (int64_t h = 0; h < 2; ++h) {
    const torch::Tensor assignment = clusters.assignment[0][h];
    EXPECT_GE(assignment.min().item<int64_t>(), 0);
    EXPECT_LT(assignment.max().item<int64_t>(), 5);
    EXPECT_GT(std::get<0>(torch::_unique(assignment)).numel(), 1);
    for (int64_t c = 0; c < 5; ++c) {
      const torch::Tensor rows = out[0][h].index({assignment == c});
      if (rows.size(0) == 0) continue;
      // Outputs are the cluster centroid's softmax attention.
      const torch::Tensor centroid = q[0][h].index({assignment == c}).mean(0).view({1, 1, 1, 4});
      const torch::Tensor expected = testing::NaiveSoftmaxAttention(centroid, k.slice(1, h, h + 1),
                                                                    v.slice(1, h, h + 1), {}, 0.5);
      EXPECT_LT(MaxAbs(rows - expected.view({1, 3})), 1e-12) << "head " << h << " cluster " << c;
    }
  }
}

TEST(ClusteredAttention, PackedClusteringEqualsTheTensorFormulation) {
  torch::manual_seed(6);
  // Random queries and queries drawn from a few prototypes (many duplicate codes), with padding.
  const torch::Tensor random = torch::randn({2, 3, 200, 8});
  const torch::Tensor prototypes = torch::randn({2, 3, 5, 8});
  const torch::Tensor duplicated =
      prototypes.index_select(2, torch::randint(5, {200}, torch::kLong));
  const torch::Tensor valid = testing::LengthMask({200, 131}, 200);
  for (const torch::Tensor& q : {random, duplicated}) {
    for (const int64_t bits : {1, 6, 63}) {
      for (const int64_t clusters : {1, 3, 20, 100}) {
        for (const int64_t iterations : {0, 1, 10}) {
          AttentionOptions options = Options(clusters, /*seed=*/bits);
          options.hash_bits = bits;
          options.lloyd_iterations = iterations;
          const torch::Tensor assignment = ClusterQueries(q, valid, options).assignment;
          const torch::Tensor expected =
              TensorHammingKMeans(HashQueries(q, bits, options.seed), valid, clusters, iterations);
          // Sequence 1 has 131 real queries: with 100 clusters or more, every one is its own.
          EXPECT_TRUE(torch::equal(assignment[0], expected[0]))
              << bits << " bits, " << clusters << " clusters, " << iterations << " iterations";
          if (clusters < 131) {
            EXPECT_TRUE(torch::equal(assignment[1], expected[1]))
                << bits << " bits, " << clusters << " clusters, " << iterations << " iterations";
          }
        }
      }
    }
  }
}

TEST(ClusteredAttention, HashesAndClustersAreDeterministicForASeed) {
  torch::manual_seed(4);
  const torch::Tensor q = torch::randn({2, 2, 30, 4});
  const torch::Tensor codes = HashQueries(q, 63, 7);
  EXPECT_EQ(codes.sizes(), (std::vector<int64_t>{2, 2, 30, 63}));
  EXPECT_TRUE(((codes == 0) | (codes == 1)).all().item<bool>());
  EXPECT_TRUE(torch::equal(codes, HashQueries(q, 63, 7)));
  EXPECT_FALSE(torch::equal(codes, HashQueries(q, 63, 8)));
  // Same seed: the same result in float32 and float64 and across instances.
  const torch::Tensor v = torch::randn({2, 2, 30, 3});
  const torch::Tensor out = ClusteredAttention(Options(4, 7)).forward(q, q, v, {});
  EXPECT_TRUE(torch::equal(out, ClusteredAttention(Options(4, 7)).forward(q, q, v, {})));
  EXPECT_EQ(out.scalar_type(), torch::kFloat32);
  EXPECT_LT(
      MaxAbs(out.to(torch::kFloat64) -
             ClusteredAttention(Options(4, 7))
                 .forward(q.to(torch::kFloat64), q.to(torch::kFloat64), v.to(torch::kFloat64), {})),
      1e-5);
}

TEST(ClusteredAttention, PaddingIsInvisibleAndBatchEqualsSingle) {
  torch::manual_seed(5);
  ClusteredAttention attention(Options(3));
  testing::ExpectPaddingInvisibleAndBatchEqualsSingle(attention, /*head_dim=*/4);
}

TEST(ClusteredAttention, RejectsInvalidOptions) {
  AttentionOptions options = Options(4);
  for (const int64_t bits : {0, 64}) {
    options.hash_bits = bits;
    EXPECT_THROW(ClusteredAttention{options}, c10::Error) << bits << " bits";
  }
  options = Options(0);
  EXPECT_THROW(ClusteredAttention{options}, c10::Error);
  options = Options(4);
  options.lloyd_iterations = -1;
  EXPECT_THROW(ClusteredAttention{options}, c10::Error);
}

}  // namespace
}  // namespace vidclf::model::attention
