#include "model/attention/nystrom_attention.h"

#include <algorithm>
#include <limits>

namespace vidclf::model::attention {
namespace {

// [B, N] bool rows mask, all true when undefined.
torch::Tensor RowMask(const torch::Tensor& mask, const torch::Tensor& x) {
  if (mask.defined()) return mask.to(x.device());
  return torch::ones({x.size(0), x.size(2)},
                     torch::TensorOptions().dtype(torch::kBool).device(x.device()));
}

// Mean of each segment: the real rows of x [B, H, N, D] (mask [B, N]), in order, split into
// segments[b] consecutive runs; [B, H, landmarks, D], zero past segments[b].
torch::Tensor SegmentMeans(const torch::Tensor& x, const torch::Tensor& mask,
                           const torch::Tensor& segments, int64_t landmarks) {
  const torch::Tensor real = mask.to(torch::kLong);
  const torch::Tensor count = real.sum(1, /*keepdim=*/true).clamp_min(1);  // [B, 1]
  const torch::Tensor rank = real.cumsum(1) - 1;
  const torch::Tensor segment =
      torch::where(mask, torch::div(rank * segments.unsqueeze(1), count, "floor"),
                   torch::full_like(rank, -1));  // [B, N], -1 for padded rows
  const torch::Tensor slots =
      torch::arange(landmarks, torch::TensorOptions().dtype(torch::kLong).device(x.device()));
  const torch::Tensor member =
      (segment.unsqueeze(1) == slots.view({1, landmarks, 1})).to(x.scalar_type());  // [B, m, N]
  const torch::Tensor weights = member / member.sum(-1, /*keepdim=*/true).clamp_min(1);
  return torch::matmul(weights.unsqueeze(1), x);
}

// Sets masked entries to zero weight; see clustering.h's MaskedSoftmax (kept local so that this
// mechanism does not depend on the clustering code).
torch::Tensor MaskedSoftmax(const torch::Tensor& scores, const torch::Tensor& valid) {
  return torch::softmax(scores.masked_fill(valid.logical_not(), -std::numeric_limits<float>::max()),
                        -1);
}

}  // namespace

torch::Tensor IterativePseudoInverse(const torch::Tensor& a, int64_t iterations) {
  TORCH_CHECK(a.dim() >= 2 && a.size(-1) == a.size(-2),
              "IterativePseudoInverse needs square matrices [..., m, m]; got ", a.sizes());
  TORCH_CHECK(iterations >= 0, "IterativePseudoInverse needs iterations >= 0; got ", iterations);
  const torch::Tensor magnitude = a.abs();
  const torch::Tensor norm_1 = std::get<0>(magnitude.sum(-2).max(-1, /*keepdim=*/true));
  const torch::Tensor norm_inf = std::get<0>(magnitude.sum(-1).max(-1, /*keepdim=*/true));
  torch::Tensor z = a.transpose(-2, -1) / (norm_1 * norm_inf).unsqueeze(-1);
  const torch::Tensor identity = torch::eye(a.size(-1), a.options());
  for (int64_t j = 0; j < iterations; ++j) {
    const torch::Tensor az = torch::matmul(a, z);
    z = 0.25 * torch::matmul(
                   z, 13 * identity -
                          torch::matmul(az, 15 * identity - torch::matmul(az, 7 * identity - az)));
  }
  return z;
}

torch::Tensor NystromLandmarks(const torch::Tensor& x, const torch::Tensor& mask,
                               int64_t landmarks) {
  TORCH_CHECK(x.dim() == 4, "NystromLandmarks needs x shaped [B, H, N, D]; got ", x.sizes());
  TORCH_CHECK(landmarks >= 1, "NystromLandmarks needs landmarks >= 1; got ", landmarks);
  const torch::Tensor rows = RowMask(mask, x);
  return SegmentMeans(x, rows, rows.sum(1).clamp_max(landmarks), landmarks);
}

NystromAttention::NystromAttention(const AttentionOptions& options) : options_(options) {
  TORCH_CHECK(kNystromLandmarks.Of(options_) >= 1,
              "nystrom attention needs nystrom_landmarks >= 1; got ",
              kNystromLandmarks.Of(options_));
  TORCH_CHECK(kNystromPinvIterations.Of(options_) >= 0,
              "nystrom attention needs nystrom_pinv_iterations >= 0; got ",
              kNystromPinvIterations.Of(options_));
}

torch::Tensor NystromAttention::forward(const torch::Tensor& queries, const torch::Tensor& keys,
                                        const torch::Tensor& values,
                                        const torch::Tensor& key_padding_mask) {
  CheckAttentionInputs(queries, keys, values, key_padding_mask);
  const int64_t batch = keys.size(0), landmarks = kNystromLandmarks.Of(options_);
  const double scale = ScoreScale(options_);
  const torch::Tensor key_rows = RowMask(key_padding_mask, keys);
  // Self-attention shapes: the key mask marks padded queries too.
  const torch::Tensor query_rows =
      queries.size(2) == keys.size(2) ? key_rows : RowMask(torch::Tensor(), queries);
  const torch::Tensor used =
      torch::minimum(query_rows.sum(1), key_rows.sum(1)).clamp_max(landmarks);  // m' [B]
  const torch::Tensor query_landmarks = SegmentMeans(queries, query_rows, used, landmarks);
  const torch::Tensor key_landmarks = SegmentMeans(keys, key_rows, used, landmarks);
  const torch::Tensor slot_used =
      torch::arange(landmarks, used.options()).unsqueeze(0) < used.unsqueeze(1);  // [B, m]
  const torch::Tensor slot_column = slot_used.view({batch, 1, 1, landmarks});

  const torch::Tensor kernel_f =
      MaskedSoftmax(torch::matmul(queries, key_landmarks.transpose(-2, -1)) * scale, slot_column);
  torch::Tensor kernel_a = MaskedSoftmax(
      torch::matmul(query_landmarks, key_landmarks.transpose(-2, -1)) * scale, slot_column);
  kernel_a = torch::where(slot_used.view({batch, 1, landmarks, 1}), kernel_a,
                          torch::eye(landmarks, kernel_a.options()));
  const torch::Tensor kernel_b =
      MaskedSoftmax(torch::matmul(query_landmarks, keys.transpose(-2, -1)) * scale,
                    key_rows.view({batch, 1, 1, keys.size(2)}));
  const torch::Tensor inverse =
      IterativePseudoInverse(kernel_a, kNystromPinvIterations.Of(options_));
  return torch::matmul(kernel_f, torch::matmul(inverse, torch::matmul(kernel_b, values)));
}

const AttentionSpec& NystromAttentionSpec() {
  static const auto* spec = [] {
    auto* spec = new AttentionSpec;
    spec->name = "nystrom";
    spec->summary = "Nystrom approximation of the softmax matrix from m landmarks";
    spec->causality = Causality::kNever;
    spec->parameters = {kNystromLandmarks, kNystromPinvIterations};
    spec->flops_per_head = [](double n, double e, const AttentionOptions& options) {
      // 4 n m e + 2 m^2 e + 8 i m^3 + 2 m n e: F, B and A; i pseudo-inverse iterations of four
      // m x m products; F (pinv(A) (B V)).
      const double m = std::min(static_cast<double>(kNystromLandmarks.Of(options)), n);
      const auto iterations = static_cast<double>(kNystromPinvIterations.Of(options));
      return 4 * n * m * e + 2 * m * m * e + 8 * iterations * m * m * m + 2 * m * n * e;
    };
    spec->make = &Construct<NystromAttention>;
    return spec;
  }();
  return *spec;
}

}  // namespace vidclf::model::attention
