#include "model/attention/causal_linear_attention.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/attention/linear_attention.h"

namespace vidclf::model::attention {

std::pair<torch::Tensor, AttentionState> CausalLinearAttentionFromFeatures(
    const torch::Tensor& phi_q, const torch::Tensor& phi_k, const torch::Tensor& values,
    double epsilon, const AttentionState& state) {
  const int64_t batch = phi_q.size(0), heads = phi_q.size(1), length = phi_q.size(2);
  const int64_t features = phi_q.size(3), value_dim = values.size(3);
  TORCH_CHECK(state.s.defined() == state.z.defined(),
              "causal linear attention state must have both s and z, or neither");
  torch::Tensor s = state.s, z = state.z;
  if (s.defined()) {
    TORCH_CHECK(s.dim() == 4 && z.dim() == 3 && s.size(0) == z.size(0),
                "causal linear attention state must be s [B, H, E, M] and z [B, H, E]; got ",
                s.sizes(), " and ", z.sizes());
    TORCH_CHECK(s.size(0) == batch,
                "causal linear attention: batch size changed between chunks; the state was built "
                "for ",
                s.size(0), " sequences, this chunk has ", batch);
    TORCH_CHECK(s.size(1) == heads && s.size(2) == features && s.size(3) == value_dim &&
                    z.size(1) == heads && z.size(2) == features,
                "causal linear attention: the state [B, H, E, M] = ", s.sizes(), ", z ", z.sizes(),
                " does not fit this chunk's heads ", heads, ", width ", features,
                " and value width ", value_dim);
  } else {
    s = torch::zeros({batch, heads, features, value_dim}, phi_q.options());
    z = torch::zeros({batch, heads, features}, phi_q.options());
  }
  if (length == 0) return {torch::zeros({batch, heads, 0, value_dim}, values.options()), {s, z}};

  std::vector<torch::Tensor> outputs;
  for (int64_t start = 0; start < length; start += kCausalLinearBlock) {
    const int64_t end = std::min(start + kCausalLinearBlock, length);
    const torch::Tensor q = phi_q.slice(2, start, end), k = phi_k.slice(2, start, end);
    const torch::Tensor v = values.slice(2, start, end);
    // Within the block, weights phi(Q_i).phi(K_j) for j <= i; earlier blocks come through (s, z).
    const torch::Tensor weights = torch::matmul(q, k.transpose(-2, -1)).tril();
    const torch::Tensor numerator = torch::matmul(weights, v) + torch::matmul(q, s);
    const torch::Tensor denominator =
        weights.sum(/*dim=*/-1, /*keepdim=*/true) + torch::matmul(q, z.unsqueeze(-1));
    outputs.push_back(numerator / (denominator + epsilon));
    // A block of one frame (a live stream's step) adds an outer product: addcmul makes one
    // tensor where matmul and + make two, which the step's allocations show at many streams.
    s = end - start == 1 ? torch::addcmul(s, k.transpose(-2, -1), v)
                         : s + torch::matmul(k.transpose(-2, -1), v);
    z = z + k.sum(/*dim=*/2);
  }
  return {torch::cat(outputs, /*dim=*/2), {s, z}};
}

CausalLinearAttention::CausalLinearAttention(const AttentionOptions& options) : options_(options) {
  TORCH_CHECK(std::isfinite(options_.epsilon) && options_.epsilon > 0,
              "causal-linear attention needs a finite epsilon > 0; got ", options_.epsilon);
}

torch::Tensor CausalLinearAttention::forward(const torch::Tensor& queries,
                                             const torch::Tensor& keys, const torch::Tensor& values,
                                             const torch::Tensor& key_padding_mask) {
  CheckAttentionInputs(queries, keys, values, key_padding_mask);
  TORCH_CHECK(queries.size(2) == keys.size(2),
              "causal-linear attention needs as many queries as keys (L == S); got L = ",
              queries.size(2), ", S = ", keys.size(2));
  return CausalLinearAttentionFromFeatures(
             EluFeatureMap(queries), ZeroPaddedKeys(EluFeatureMap(keys), key_padding_mask),
             ZeroPaddedKeys(values, key_padding_mask), options_.epsilon, AttentionState{})
      .first;
}

std::pair<torch::Tensor, AttentionState> CausalLinearAttention::forward_chunk(
    const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
    const AttentionState& state) {
  CheckAttentionInputs(q, k, v, torch::Tensor());
  TORCH_CHECK(q.size(2) == k.size(2),
              "causal-linear attention chunks need as many queries as keys; got ", q.size(2),
              " and ", k.size(2));
  return CausalLinearAttentionFromFeatures(EluFeatureMap(q), EluFeatureMap(k), v, options_.epsilon,
                                           state);
}

std::pair<torch::Tensor, std::vector<AttentionState>> CausalLinearAttention::forward_one_frame_each(
    const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
    const std::vector<AttentionState>& states) const {
  TORCH_CHECK(q.dim() == 3 && k.sizes() == q.sizes() && v.dim() == 3 && v.size(0) == q.size(0) &&
                  v.size(1) == q.size(1),
              "causal-linear attention steps q, k [B, H, E] and v [B, H, M]; got ", q.sizes(), ", ",
              k.sizes(), " and ", v.sizes());
  const int64_t batch = q.size(0), heads = q.size(1), features = q.size(2), value_dim = v.size(2);
  TORCH_CHECK(static_cast<int64_t>(states.size()) == batch,
              "causal-linear attention: ", states.size(), " states for ", batch, " sequences");
  const auto float_cpu = [](const torch::Tensor& t) {
    return t.device().is_cpu() && t.scalar_type() == torch::kFloat;
  };
  TORCH_CHECK(float_cpu(q) && float_cpu(k) && float_cpu(v),
              "causal-linear attention steps float32 tensors on the CPU");
  std::vector<AttentionState> next(batch);
  std::vector<AttentionState> before(batch);
  for (int64_t b = 0; b < batch; ++b) {
    const AttentionState& state = states[b];
    TORCH_CHECK(state.s.defined() == state.z.defined(),
                "causal linear attention state must have both s and z, or neither");
    if (state.s.defined()) {
      TORCH_CHECK(state.s.sizes() == torch::IntArrayRef({1, heads, features, value_dim}) &&
                      state.z.sizes() == torch::IntArrayRef({1, heads, features}) &&
                      float_cpu(state.s) && float_cpu(state.z),
                  "causal-linear attention: sequence ", b,
                  "'s state [B, H, E, M] = ", state.s.sizes(), ", z ", state.z.sizes(),
                  " does not fit one sequence of ", heads, " heads, width ", features,
                  " and value width ", value_dim);
      before[b] = {state.s.contiguous(), state.z.contiguous()};
    }
    next[b] = {torch::empty({1, heads, features, value_dim}, q.options()),
               torch::empty({1, heads, features}, q.options())};
  }
  const torch::Tensor queries = q.contiguous(), keys = k.contiguous(), values = v.contiguous();
  torch::Tensor out = torch::empty({batch, heads, value_dim}, q.options());
  const float* query_data = queries.data_ptr<float>();
  const float* key_data = keys.data_ptr<float>();
  const float* value_data = values.data_ptr<float>();
  float* out_data = out.data_ptr<float>();
  const double epsilon = options_.epsilon;
  // A (sequence, head) pair reads and writes 2 E M numbers of state: 16 pairs make a task worth a
  // sleeping thread's wake-up.
  at::parallel_for(0, batch * heads, 16, [&](int64_t first, int64_t last) {
    std::vector<float> phi_q(features), phi_k(features);
    for (int64_t pair = first; pair < last; ++pair) {
      const int64_t b = pair / heads, h = pair % heads;
      const int64_t row = b * heads + h;
      for (int64_t e = 0; e < features; ++e) {  // phi(x) = elu(x) + 1
        const float qe = query_data[row * features + e];
        const float ke = key_data[row * features + e];
        phi_q[e] = qe > 0 ? qe + 1 : std::exp(qe);
        phi_k[e] = ke > 0 ? ke + 1 : std::exp(ke);
      }
      const float* value = value_data + row * value_dim;
      const float* s = before[b].s.defined()
                           ? before[b].s.data_ptr<float>() + h * features * value_dim
                           : nullptr;
      const float* z =
          before[b].z.defined() ? before[b].z.data_ptr<float>() + h * features : nullptr;
      float* next_s = next[b].s.data_ptr<float>() + h * features * value_dim;
      float* next_z = next[b].z.data_ptr<float>() + h * features;
      float* mixed = out_data + row * value_dim;
      // S' = S + phi(k) v^T and Z' = Z + phi(k); out = phi(q)^T S' / (phi(q)^T Z' + epsilon).
      double denominator = epsilon;
      std::fill(mixed, mixed + value_dim, 0.0F);
      for (int64_t e = 0; e < features; ++e) {
        next_z[e] = (z != nullptr ? z[e] : 0.0F) + phi_k[e];
        denominator += static_cast<double>(phi_q[e]) * next_z[e];
        const float key = phi_k[e], query = phi_q[e];
        float* next_row = next_s + e * value_dim;
        if (s != nullptr) {
          const float* row = s + e * value_dim;
          for (int64_t m = 0; m < value_dim; ++m) next_row[m] = row[m] + key * value[m];
        } else {
          for (int64_t m = 0; m < value_dim; ++m) next_row[m] = key * value[m];
        }
        for (int64_t m = 0; m < value_dim; ++m) mixed[m] += query * next_row[m];
      }
      const auto scale = static_cast<float>(1.0 / denominator);
      for (int64_t m = 0; m < value_dim; ++m) mixed[m] *= scale;
    }
  });
  return {out, std::move(next)};
}

const AttentionSpec& CausalLinearAttentionSpec() {
  static const auto* spec = [] {
    auto* spec = new AttentionSpec;
    spec->name = "causal-linear";
    spec->summary = "linear attention under a causal mask, with a recurrent form for live streams";
    spec->causality = Causality::kAlways;
    spec->flops_per_head = [](double n, double e, const AttentionOptions& /*options*/) {
      // As linear: prefix sums instead of sums.
      return 4 * n * e * e + 4 * n * e;
    };
    spec->make = &Construct<CausalLinearAttention>;
    return spec;
  }();
  return *spec;
}

}  // namespace vidclf::model::attention
