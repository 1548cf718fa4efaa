#include "model/heads/few_rows_linear.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "model/heads/row_kernels.h"

namespace vidclf::model {
namespace {

// Multiply-adds per task. The server's OpenMP threads sleep between tasks
// (OMP_WAIT_POLICY=PASSIVE) and take tens of microseconds to wake, so a layer is split between
// threads only where each share outweighs that. A single row waits on memory rather than on
// arithmetic and gained nothing from a second thread.
constexpr int64_t kWorkPerTask = int64_t{1} << 19;

}  // namespace

int64_t MaxFewRows() {
  switch (FastestRowKernel()) {
    case RowKernel::kAvx512:
      return 16;
    case RowKernel::kAvx2:
      return 8;
    case RowKernel::kPortable:
      break;
  }
  return 4;
}

torch::Tensor ApplyLinear(torch::nn::LinearImpl& layer, const torch::Tensor& x) {
  const torch::Tensor& weight = layer.weight;
  const torch::Tensor& bias = layer.bias;
  const int64_t in_features = weight.size(1);
  const bool fits =
      x.device().is_cpu() && weight.device().is_cpu() && x.scalar_type() == torch::kFloat &&
      weight.scalar_type() == torch::kFloat && x.dim() >= 1 && x.size(-1) == in_features &&
      x.numel() <= MaxFewRows() * in_features && x.numel() > 0 && !torch::GradMode::is_enabled();
  if (!fits) return layer.forward(x);
  const int64_t rows = x.numel() / in_features;
  const int64_t out_features = weight.size(0);
  const torch::Tensor input = x.contiguous();
  const torch::Tensor weights = weight.contiguous();
  const torch::Tensor biases = bias.defined() ? bias.contiguous() : bias;
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = out_features;
  torch::Tensor out = torch::empty(sizes, x.options());
  const float* bias_data = biases.defined() ? biases.data_ptr<float>() : nullptr;
  const float* x_data = input.data_ptr<float>();
  const float* weight_data = weights.data_ptr<float>();
  float* out_data = out.data_ptr<float>();
  const RowKernel kernel = FastestRowKernel();
  const int64_t grain = std::max<int64_t>(1, kWorkPerTask / (rows * in_features));
  at::parallel_for(0, out_features, grain, [&](int64_t first, int64_t last) {
    MultiplyRows(kernel, x_data, rows, weight_data, bias_data, out_data, in_features, out_features,
                 first, last);
  });
  return out;
}

}  // namespace vidclf::model
