#include "model/attention/clustered_attention.h"

#include <gtest/gtest.h>

#include <vector>

#include "model/attention/clustering.h"
#include "tests/model/attention/reference.h"

namespace vidclf::model::attention {
namespace {

using testing::MaxAbs;

AttentionOptions ClusteredOptions(int64_t clusters, uint64_t seed = 0) {
  AttentionOptions options;
  options.type = "clustered";
  options.head_dim = 4;
  options.value_dim = 3;
  options.parameters["clusters"] = clusters;
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
    const torch::Tensor out = ClusteredAttention(ClusteredOptions(clusters)).forward(q, k, v, mask);
    EXPECT_LT(MaxAbs(out[0] - expected[0]), 1e-12) << clusters << " clusters";
    EXPECT_LT(MaxAbs(out[1].slice(1, 0, 6) - expected[1].slice(1, 0, 6)), 1e-12) << clusters;
  }
  const torch::Tensor out = ClusteredAttention(ClusteredOptions(6)).forward(q, k, v, mask);
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
    const torch::Tensor out = ClusteredAttention(ClusteredOptions(20)).forward(q, k, v, {});
    EXPECT_TRUE(torch::isfinite(out).all().item<bool>());
    EXPECT_LT(MaxAbs(out - testing::NaiveSoftmaxAttention(q, k, v, {}, 0.5)), 1e-12);
  }
}

TEST(ClusteredAttention, QueriesOfOneClusterGetIdenticalOutputs) {
  torch::manual_seed(3);
  const AttentionOptions options = ClusteredOptions(5);
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

// The popcount clustering of queries on the CPU and the tensor one that runs for queries on CUDA
// (here on the CPU, and on the GPU where there is one) must agree exactly.
TEST(ClusteredAttention, TensorClusteringEqualsThePackedOne) {
  torch::manual_seed(6);
  // Random queries and queries drawn from a few prototypes (many duplicate codes), with padding.
  const torch::Tensor random = torch::randn({2, 3, 200, 8}, torch::kFloat64);
  const torch::Tensor prototypes = torch::randn({2, 3, 5, 8}, torch::kFloat64);
  const torch::Tensor duplicated =
      prototypes.index_select(2, torch::randint(5, {200}, torch::kLong));
  const torch::Tensor valid = testing::LengthMask({200, 131}, 200);
  for (const torch::Tensor& q : {random, duplicated}) {
    for (const int64_t bits : {1, 6, 63}) {
      // Sequence 1 has 131 real queries: with 131 clusters or more, every one is its own.
      for (const int64_t clusters : {1, 3, 20, 100, 150}) {
        for (const int64_t iterations : {0, 1, 10}) {
          AttentionOptions options = ClusteredOptions(clusters, /*seed=*/bits);
          options.parameters["hash_bits"] = bits;
          options.parameters["lloyd_iterations"] = iterations;
          const torch::Tensor packed = ClusterQueries(q, valid, options).assignment;
          EXPECT_TRUE(torch::equal(ClusterQueriesWithTensors(q, valid, options).assignment, packed))
              << bits << " bits, " << clusters << " clusters, " << iterations << " iterations";
          if (!torch::cuda::is_available()) continue;
          const torch::Tensor on_gpu =
              ClusterQueries(q.to(torch::kCUDA), valid.to(torch::kCUDA), options).assignment;
          ASSERT_TRUE(on_gpu.is_cuda());
          EXPECT_TRUE(torch::equal(on_gpu.cpu(), packed))
              << "on the GPU: " << bits << " bits, " << clusters << " clusters, " << iterations
              << " iterations";
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
  const torch::Tensor out = ClusteredAttention(ClusteredOptions(4, 7)).forward(q, q, v, {});
  EXPECT_TRUE(torch::equal(out, ClusteredAttention(ClusteredOptions(4, 7)).forward(q, q, v, {})));
  EXPECT_EQ(out.scalar_type(), torch::kFloat32);
  EXPECT_LT(
      MaxAbs(out.to(torch::kFloat64) -
             ClusteredAttention(ClusteredOptions(4, 7))
                 .forward(q.to(torch::kFloat64), q.to(torch::kFloat64), v.to(torch::kFloat64), {})),
      1e-5);
}

TEST(ClusteredAttention, PaddingIsInvisibleAndBatchEqualsSingle) {
  torch::manual_seed(5);
  ClusteredAttention attention(ClusteredOptions(3));
  testing::ExpectPaddingInvisibleAndBatchEqualsSingle(attention, /*head_dim=*/4);
}

TEST(ClusteredAttention, RejectsInvalidOptions) {
  AttentionOptions options = ClusteredOptions(4);
  for (const int64_t bits : {0, 64}) {
    options.parameters["hash_bits"] = bits;
    EXPECT_THROW(ClusteredAttention{options}, c10::Error) << bits << " bits";
  }
  options = ClusteredOptions(0);
  EXPECT_THROW(ClusteredAttention{options}, c10::Error);
  options = ClusteredOptions(4);
  options.parameters["lloyd_iterations"] = -1;
  EXPECT_THROW(ClusteredAttention{options}, c10::Error);
}

}  // namespace
}  // namespace vidclf::model::attention
