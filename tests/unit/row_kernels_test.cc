#include "model/heads/row_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace vidclf::model {
namespace {

// The kernel's sums against sums in double precision, for every kernel this CPU runs.
// Widths: not a multiple of 8 (the portable loop), of 8 only (AVX2 under AVX-512), of 16, and the
// head's 512 and 1024. Outputs and rows around the kernels' blocks of 4 outputs and 2 or 4 rows,
// over all the outputs and over a range inside them, as a thread's share of a layer is.
TEST(RowKernels, EveryKernelThisCpuRunsSumsAsDoublesDo) {
  std::mt19937 random(7);
  std::normal_distribution<float> normal;
  for (const RowKernel kernel : RowKernelsThisCpuRuns()) {
    for (const int64_t in : {1, 12, 24, 48, 512, 1024}) {
      for (const int64_t outputs : {1, 3, 4, 5, 9}) {
        for (const int64_t rows : {1, 2, 3, 4, 5, 7, 8, 9, 16}) {
          std::vector<float> x(rows * in), weight(outputs * in), bias(outputs);
          for (float& v : x) v = normal(random);
          for (float& v : weight) v = normal(random);
          for (float& v : bias) v = normal(random);
          for (const bool with_bias : {true, false}) {
            for (const auto& [first, last] : std::vector<std::pair<int64_t, int64_t>>{
                     {0, outputs}, {outputs / 3, outputs - outputs / 3}}) {
              std::vector<float> out(rows * outputs, -1.0F);
              MultiplyRows(kernel, x.data(), rows, weight.data(), with_bias ? bias.data() : nullptr,
                           out.data(), in, outputs, first, last);
              for (int64_t r = 0; r < rows; ++r) {
                for (int64_t o = 0; o < outputs; ++o) {
                  const std::string where = std::string(RowKernelName(kernel)) + ", " +
                                            std::to_string(in) + " in, output " +
                                            std::to_string(o) + ", row " + std::to_string(r);
                  const float got = out[r * outputs + o];
                  if (o < first || o >= last) {
                    EXPECT_EQ(got, -1.0F) << where << " is outside the range and was written";
                    continue;
                  }
                  double want = with_bias ? bias[o] : 0.0;
                  for (int64_t i = 0; i < in; ++i) {
                    want += static_cast<double>(weight[o * in + i]) * x[r * in + i];
                  }
                  EXPECT_NEAR(got, want, 1e-5 * std::max(1.0, std::sqrt(static_cast<double>(in))))
                      << where;
                }
              }
            }
          }
        }
      }
    }
  }
}

// Where the CPU runs AVX2 with FMA, the vector kernels must be what ApplyLinear uses: a
// dispatch that fell back to the portable loop would be correct, and 1.7x slower for 4 streams.
TEST(RowKernels, TheFastestIsTheWidestTheCpuRuns) {
  const std::vector<RowKernel> kernels = RowKernelsThisCpuRuns();
  ASSERT_FALSE(kernels.empty());
  EXPECT_EQ(kernels.front(), RowKernel::kPortable);
  EXPECT_EQ(FastestRowKernel(), kernels.back());
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) {
    EXPECT_EQ(FastestRowKernel(), RowKernel::kAvx512);
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    EXPECT_EQ(FastestRowKernel(), RowKernel::kAvx2);
  }
#endif
}

}  // namespace
}  // namespace vidclf::model
