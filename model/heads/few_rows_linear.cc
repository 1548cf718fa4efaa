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

// out = x's rows through `multiply(x, rows, out, first, last)`, which writes outputs
// [first, last) of every row; the outputs are split between the intra-op threads.
template <typename Multiply>
torch::Tensor ApplyToRows(const torch::Tensor& x, int64_t in_features, int64_t out_features,
                          const Multiply& multiply) {
  const int64_t rows = x.numel() / in_features;
  const torch::Tensor input = x.contiguous();
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = out_features;
  torch::Tensor out = torch::empty(sizes, x.options());
  const float* x_data = input.data_ptr<float>();
  float* out_data = out.data_ptr<float>();
  const int64_t grain =
      std::max<int64_t>(1, kWorkPerTask / std::max<int64_t>(1, rows * in_features));
  at::parallel_for(0, out_features, grain, [&](int64_t first, int64_t last) {
    multiply(x_data, rows, out_data, first, last);
  });
  return out;
}

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
  const int64_t in_features = weight.size(1);
  const bool fits =
      x.device().is_cpu() && weight.device().is_cpu() && x.scalar_type() == torch::kFloat &&
      weight.scalar_type() == torch::kFloat && x.dim() >= 1 && x.size(-1) == in_features &&
      x.numel() <= MaxFewRows() * in_features && x.numel() > 0 && !torch::GradMode::is_enabled();
  if (!fits) return layer.forward(x);
  const int64_t out_features = weight.size(0);
  const torch::Tensor weights = weight.contiguous();
  const torch::Tensor biases = layer.bias.defined() ? layer.bias.contiguous() : layer.bias;
  const float* weight_data = weights.data_ptr<float>();
  const float* bias_data = biases.defined() ? biases.data_ptr<float>() : nullptr;
  const RowKernel kernel = FastestRowKernel();
  return ApplyToRows(
      x, in_features, out_features,
      [&](const float* x_data, int64_t rows, float* out, int64_t first, int64_t last) {
        MultiplyRows(kernel, x_data, rows, weight_data, bias_data, out, in_features, out_features,
                     first, last);
      });
}

Int8Linear QuantizeRows(const torch::nn::LinearImpl& layer) {
  torch::NoGradGuard no_grad;
  const torch::Tensor weight = layer.weight.detach().to(torch::kCPU, torch::kFloat);
  // A row of zeros keeps scale 1 rather than dividing by zero.
  torch::Tensor scales = weight.abs().amax(/*dim=*/1) / 127.0;
  scales = torch::where(scales > 0, scales, torch::ones_like(scales));
  Int8Linear quantized;
  quantized.weight =
      (weight / scales.unsqueeze(1)).round().clamp(-127, 127).to(torch::kChar).contiguous();
  quantized.scales = scales.contiguous();
  if (layer.bias.defined()) {
    quantized.bias = layer.bias.detach().to(torch::kCPU, torch::kFloat).contiguous();
  }
  return quantized;
}

torch::Tensor ApplyLinear(const Int8Linear& layer, const torch::Tensor& x) {
  const int64_t out_features = layer.weight.size(0);
  const int64_t in_features = layer.weight.size(1);
  TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat,
              "int8 weights apply to float32 inputs on the CPU; got ", x.scalar_type(), " on ",
              x.device());
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) == in_features, "int8 linear layer takes ", in_features,
              " features; got input of shape ", x.sizes());
  const int8_t* weight_data = layer.weight.data_ptr<int8_t>();
  const float* scales = layer.scales.data_ptr<float>();
  const float* bias_data = layer.bias.defined() ? layer.bias.data_ptr<float>() : nullptr;
  const RowKernel kernel = FastestRowKernel();
  return ApplyToRows(
      x, in_features, out_features,
      [&](const float* x_data, int64_t rows, float* out, int64_t first, int64_t last) {
        MultiplyRows(kernel, x_data, rows, weight_data, scales, bias_data, out, in_features,
                     out_features, first, last);
      });
}

}  // namespace vidclf::model
