// Matrix-vector products for a few rows, as a live stream's step applies each linear layer of its
// head to one new frame per stream. Their time is reading the weights: each kernel reads a weight
// row from memory once and uses it for every row of the input.
//
// The library is built for the x86-64 baseline (SSE2), which a portable loop gets. The vector
// kernels are compiled for AVX2 with FMA and for AVX-512 and chosen by what the CPU runs: one
// vector instruction does 4 or 8 times the portable loop's multiply-adds, so more rows fit in the
// time the weights take to arrive.
#ifndef VIDCLF_MODEL_HEADS_ROW_KERNELS_H_
#define VIDCLF_MODEL_HEADS_ROW_KERNELS_H_

#include <cstdint>
#include <string_view>
#include <vector>

namespace vidclf::model {

enum class RowKernel { kPortable, kAvx2, kAvx512 };

std::string_view RowKernelName(RowKernel kernel);

// The kernels this CPU runs, the portable one first and the widest last.
std::vector<RowKernel> RowKernelsThisCpuRuns();

// The widest of those: what ApplyLinear uses.
RowKernel FastestRowKernel();

// out[r * out_features + o] = bias[o] + sum_i weight[o * in_features + i] * x[r * in_features + i]
// for every row r < rows and every output o in [first, last). bias may be null. A vector kernel
// needs in_features to be a multiple of its width (8 or 16); other widths take the portable loop.
void MultiplyRows(RowKernel kernel, const float* x, int64_t rows, const float* weight,
                  const float* bias, float* out, int64_t in_features, int64_t out_features,
                  int64_t first, int64_t last);

// The same with int8 weights and one scale per output: weight row o stands for
// weight[o * in_features + i] * scales[o]. Reading a quarter of the bytes, a lone stream's step
// waits on memory a quarter as long.
void MultiplyRows(RowKernel kernel, const float* x, int64_t rows, const int8_t* weight,
                  const float* scales, const float* bias, float* out, int64_t in_features,
                  int64_t out_features, int64_t first, int64_t last);

}  // namespace vidclf::model

#endif  // VIDCLF_MODEL_HEADS_ROW_KERNELS_H_
