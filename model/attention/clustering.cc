#include "model/attention/clustering.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <limits>
#include <vector>

namespace vidclf::model::attention {
namespace {

// Hash codes [B, H, L, bits] as bool.
torch::Tensor HashBits(const torch::Tensor& queries, int64_t bits, uint64_t seed) {
  torch::NoGradGuard no_grad;
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  const torch::Tensor planes =
      torch::randn({bits, queries.size(-1)}, generator, torch::kFloat64).to(queries.options());
  return torch::matmul(queries.detach(), planes.t()) > 0;
}

// A query's hash code, bit b of the code being bit b here.
using Code = uint64_t;

int Hamming(Code a, Code b) { return __builtin_popcountll(a ^ b); }

// Ties go to the lowest cluster index.
int64_t NearestCentroid(Code code, const std::vector<Code>& centroids) {
  int64_t nearest = 0;
  int nearest_distance = Hamming(code, centroids[0]);
  for (size_t c = 1; c < centroids.size(); ++c) {
    const int distance = Hamming(code, centroids[c]);
    if (distance < nearest_distance) {
      nearest = static_cast<int64_t>(c);
      nearest_distance = distance;
    }
  }
  return nearest;
}

// Codes [B, H, L, bits] (bool, any device) packed into one integer per query, [B * H * L] on the
// CPU: the clustering below is a few hundred popcounts per query, cheap on a CPU core and cheaper
// than the [L, C] distance matrices a tensor formulation builds on every iteration.
std::vector<Code> PackCodes(const torch::Tensor& codes) {
  const torch::Tensor bits = codes.to(torch::kCPU).contiguous();
  const int64_t width = bits.size(-1);
  const bool* bit = bits.data_ptr<bool>();
  std::vector<Code> packed(bits.numel() / width);
  for (Code& code : packed) {
    code = 0;
    for (int64_t b = 0; b < width; ++b, ++bit) code |= static_cast<Code>(*bit) << b;
  }
  return packed;
}

// Hamming K-means of one (batch, head)'s codes, as described in clustering.h; writes the cluster
// of every query (padded ones included) to `assignment`. Almost all of its time is popcounts: on
// x86-64 it is also compiled for the POPCNT instruction, which the baseline ISA lacks, and picked
// at load time where the CPU has it.
#if defined(__x86_64__)
__attribute__((target_clones("popcnt", "default")))
#endif
void ClusterSequence(const Code* codes, const bool* valid, int64_t length, int64_t clusters,
                     int64_t bits, int64_t iterations, int64_t* assignment) {
  // Farthest-point initialisation: the first real query's code, then repeatedly the real query
  // farthest from the centroids so far, ties to the lowest position.
  const int64_t first = std::find(valid, valid + length, true) - valid;
  std::vector<Code> centroids = {codes[first == length ? 0 : first]};
  std::vector<int> nearest(length);
  for (int64_t i = 0; i < length; ++i) nearest[i] = valid[i] ? static_cast<int>(bits) + 1 : -1;
  while (static_cast<int64_t>(centroids.size()) < clusters) {
    int64_t farthest = 0;
    for (int64_t i = 0; i < length; ++i) {
      nearest[i] = std::min(nearest[i], Hamming(codes[i], centroids.back()));
      if (nearest[i] > nearest[farthest]) farthest = i;
    }
    centroids.push_back(codes[farthest]);
  }

  // Lloyd iterations: assign the real queries, then a majority vote per centroid bit; a tie
  // (an empty cluster included) keeps the bit. Once a vote changes no centroid, every later
  // iteration would repeat it: stop there.
  std::vector<int64_t> ones(clusters * bits), size(clusters);
  bool changed = true;
  for (int64_t iteration = 0; iteration < iterations && changed; ++iteration) {
    std::fill(ones.begin(), ones.end(), 0);
    std::fill(size.begin(), size.end(), 0);
    for (int64_t i = 0; i < length; ++i) {
      if (!valid[i]) continue;
      const int64_t c = NearestCentroid(codes[i], centroids);
      ++size[c];
      for (int64_t b = 0; b < bits; ++b) ones[c * bits + b] += (codes[i] >> b) & 1;
    }
    changed = false;
    for (int64_t c = 0; c < clusters; ++c) {
      const Code before = centroids[c];
      for (int64_t b = 0; b < bits; ++b) {
        const Code bit = Code{1} << b;
        if (2 * ones[c * bits + b] > size[c]) centroids[c] |= bit;
        if (2 * ones[c * bits + b] < size[c]) centroids[c] &= ~bit;
      }
      changed = changed || centroids[c] != before;
    }
  }
  for (int64_t i = 0; i < length; ++i) assignment[i] = NearestCentroid(codes[i], centroids);
}

}  // namespace

double ClusteringFlops(double n, double e, const AttentionOptions& options) {
  const auto bits = static_cast<double>(kHashBits.Of(options));
  const double clusters = std::min(static_cast<double>(kClusters.Of(options)), n);
  return 2 * n * bits * e +
         2 * static_cast<double>(kLloydIterations.Of(options)) * n * clusters * bits +
         4 * clusters * n * e;
}

void CheckClusteringOptions(const AttentionOptions& options, const char* name) {
  const int64_t bits = kHashBits.Of(options), clusters = kClusters.Of(options);
  const int64_t iterations = kLloydIterations.Of(options);
  TORCH_CHECK(bits >= 1 && bits <= 63, name, " attention needs hash_bits in [1, 63]; got ", bits);
  TORCH_CHECK(clusters >= 1, name, " attention needs clusters >= 1; got ", clusters);
  TORCH_CHECK(iterations >= 0, name, " attention needs lloyd_iterations >= 0; got ", iterations);
}

torch::Tensor QueryValidity(const torch::Tensor& queries, const torch::Tensor& keys,
                            const torch::Tensor& key_padding_mask) {
  if (key_padding_mask.defined() && queries.size(2) == keys.size(2)) {
    return key_padding_mask.to(queries.device());
  }
  return torch::ones({queries.size(0), queries.size(2)},
                     torch::TensorOptions().dtype(torch::kBool).device(queries.device()));
}

torch::Tensor HashQueries(const torch::Tensor& queries, int64_t bits, uint64_t seed) {
  return HashBits(queries, bits, seed).to(queries.scalar_type());
}

QueryClusters ClusterQueries(const torch::Tensor& queries, const torch::Tensor& query_valid,
                             const AttentionOptions& options) {
  if (queries.is_cuda()) return ClusterQueriesWithTensors(queries, query_valid, options);
  torch::NoGradGuard no_grad;
  const int64_t batch = queries.size(0), heads = queries.size(1), length = queries.size(2);
  const int64_t max_clusters = kClusters.Of(options), bits = kHashBits.Of(options);
  const int64_t iterations = kLloydIterations.Of(options);
  const int64_t clusters = std::max<int64_t>(1, std::min(max_clusters, length));
  const torch::Tensor valid = query_valid.to(torch::kCPU, torch::kBool).contiguous();
  const std::vector<Code> codes = PackCodes(HashBits(queries, bits, options.seed));
  torch::Tensor assignment = torch::empty({batch, heads, length}, torch::kLong);
  const bool* valid_data = valid.data_ptr<bool>();
  int64_t* assignment_data = assignment.data_ptr<int64_t>();
  at::parallel_for(0, batch * heads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t sequence = begin; sequence < end; ++sequence) {
      const bool* sequence_valid = valid_data + (sequence / heads) * length;
      int64_t* sequence_assignment = assignment_data + sequence * length;
      const int64_t real = std::count(sequence_valid, sequence_valid + length, true);
      if (real <= max_clusters) {
        // Few enough real queries: each is its own cluster, exactly softmax.
        int64_t rank = 0;
        for (int64_t i = 0; i < length; ++i) {
          sequence_assignment[i] = std::max<int64_t>(0, rank - 1 + sequence_valid[i]);
          rank += sequence_valid[i];
        }
        continue;
      }
      ClusterSequence(codes.data() + sequence * length, sequence_valid, length, clusters, bits,
                      iterations, sequence_assignment);
    }
  });

  QueryClusters result;
  result.assignment = assignment.to(queries.device());
  result.num_clusters = clusters;
  return result;
}

QueryClusters ClusterQueriesWithTensors(const torch::Tensor& queries,
                                        const torch::Tensor& query_valid,
                                        const AttentionOptions& options) {
  torch::NoGradGuard no_grad;
  const int64_t batch = queries.size(0), heads = queries.size(1), length = queries.size(2);
  const int64_t max_clusters = kClusters.Of(options), bits = kHashBits.Of(options);
  const int64_t clusters = std::max<int64_t>(1, std::min(max_clusters, length));
  const int64_t sequences = batch * heads;
  const torch::Tensor codes = HashBits(queries, bits, options.seed).view({sequences, length, bits});
  const torch::Tensor valid = query_valid.to(queries.device(), torch::kBool)
                                  .unsqueeze(1)
                                  .expand({batch, heads, length})
                                  .reshape({sequences, length});
  // Codes as +-1, so that Hamming distance is (bits - a . b) / 2: one batched matrix product for
  // every query against every centroid, exact in float (the sums are integers below 2^24).
  const torch::Tensor signs = codes.to(torch::kFloat) * 2 - 1;  // [S, L, bits]
  auto distances = [&](const torch::Tensor& centroids) {        // [S, C, bits] -> [S, L, C]
    return (static_cast<double>(bits) - torch::bmm(signs, centroids.transpose(1, 2))) / 2;
  };
  auto code_at = [&](const torch::Tensor& position) {  // [S] -> [S, 1, bits]
    return signs.gather(1, position.view({sequences, 1, 1}).expand({sequences, 1, bits}));
  };

  // Farthest-point initialisation; argmax and argmin return the first of equals, so ties go to the
  // lowest position and the lowest cluster as on the CPU. Padded queries start at -1 and are never
  // the farthest; a sequence with no real query starts from position 0.
  const torch::Tensor real = valid.to(torch::kFloat);
  torch::Tensor nearest = real * static_cast<double>(bits + 2) - 1;  // bits + 1, or -1 if padded
  std::vector<torch::Tensor> chosen = {code_at(valid.to(torch::kInt).argmax(1))};
  while (static_cast<int64_t>(chosen.size()) < clusters) {
    nearest = torch::minimum(nearest, distances(chosen.back()).squeeze(2));
    chosen.push_back(code_at(nearest.argmax(1)));
  }
  torch::Tensor centroids = torch::cat(chosen, 1);  // [S, C, bits]

  // Lloyd iterations, each run to the end: once a vote changes nothing, the rest repeat it, so
  // the CPU's early stop gives the same centroids without the host reading a flag every round.
  const torch::Tensor member_bits = codes.to(torch::kFloat) * real.unsqueeze(2);  // [S, L, bits]
  for (int64_t iteration = 0, iterations = kLloydIterations.Of(options); iteration < iterations;
       ++iteration) {
    const torch::Tensor cluster = distances(centroids).argmin(2).unsqueeze(2);  // [S, L, 1]
    const torch::Tensor twice_ones =
        2 * torch::zeros({sequences, clusters, bits}, signs.options())
                .scatter_add(1, cluster.expand({sequences, length, bits}), member_bits);
    const torch::Tensor size = torch::zeros({sequences, clusters, 1}, signs.options())
                                   .scatter_add(1, cluster, real.unsqueeze(2));
    centroids =
        torch::where(twice_ones > size, torch::ones_like(centroids),
                     torch::where(twice_ones < size, -torch::ones_like(centroids), centroids));
  }
  torch::Tensor assignment = distances(centroids).argmin(2);  // [S, L]

  // Sequences with at most max_clusters real queries: each real one is its own cluster, the
  // padded ones join cluster max(0, real ones before them - 1).
  const torch::Tensor singletons = (valid.cumsum(1) - 1).clamp_min(0);
  const torch::Tensor few = (valid.sum(1) <= max_clusters).unsqueeze(1);
  QueryClusters result;
  result.assignment = torch::where(few, singletons, assignment).view({batch, heads, length});
  result.num_clusters = clusters;
  return result;
}

torch::Tensor MaskedSoftmax(const torch::Tensor& scores, const torch::Tensor& valid) {
  if (!valid.defined()) return torch::softmax(scores, -1);
  // A finite fill (not -inf) keeps a row with no valid entry free of NaN.
  return torch::softmax(scores.masked_fill(valid.logical_not(), -std::numeric_limits<float>::max()),
                        -1);
}

CentroidAttention ComputeCentroidAttention(const torch::Tensor& queries, const torch::Tensor& keys,
                                           const torch::Tensor& key_padding_mask,
                                           const AttentionOptions& options) {
  CentroidAttention result;
  const torch::Tensor query_valid = QueryValidity(queries, keys, key_padding_mask);
  result.clusters = ClusterQueries(queries, query_valid, options);
  // Centroids: the mean of each cluster's real queries, summed by scatter rather than by a
  // [L, C] one-hot matmul.
  const int64_t batch = queries.size(0), heads = queries.size(1), length = queries.size(2);
  const torch::Tensor real = query_valid.view({batch, 1, length, 1}).to(queries.scalar_type());
  const torch::Tensor cluster = result.clusters.assignment.unsqueeze(-1);  // [B, H, L, 1]
  const int64_t num_clusters = result.clusters.num_clusters;
  const torch::Tensor size = torch::zeros({batch, heads, num_clusters, 1}, queries.options())
                                 .scatter_add(2, cluster, real.expand({batch, heads, length, 1}))
                                 .clamp_min(1);
  const torch::Tensor centroids =
      torch::zeros({batch, heads, num_clusters, queries.size(3)}, queries.options())
          .scatter_add(2, cluster.expand_as(queries), queries * real) /
      size;
  const torch::Tensor key_valid =
      key_padding_mask.defined()
          ? key_padding_mask.view({keys.size(0), 1, 1, keys.size(2)}).to(keys.device())
          : torch::Tensor();
  result.weights = MaskedSoftmax(
      torch::matmul(centroids, keys.transpose(-2, -1)) * ScoreScale(options), key_valid);
  return result;
}

torch::Tensor BroadcastToQueries(const torch::Tensor& per_cluster,
                                 const torch::Tensor& assignment) {
  const torch::Tensor index = assignment.unsqueeze(-1).expand(
      {assignment.size(0), assignment.size(1), assignment.size(2), per_cluster.size(-1)});
  return per_cluster.gather(2, index);
}

}  // namespace vidclf::model::attention
