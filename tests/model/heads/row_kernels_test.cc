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

// Random inputs for one shape: float32 weights, or int8 weights with a scale per output.
struct Case {
  Case(int64_t in, int64_t outputs, int64_t rows, std::mt19937& random)
      : x(rows * in),
        weight(outputs * in),
        int8_weight(outputs * in),
        scales(outputs),
        bias(outputs) {
    std::normal_distribution<float> normal;
    std::uniform_int_distribution<int> int8(-127, 127);
    std::uniform_real_distribution<float> scale(0.001F, 0.1F);
    for (float& v : x) v = normal(random);
    for (float& v : weight) v = normal(random);
    for (int8_t& v : int8_weight) v = static_cast<int8_t>(int8(random));
    for (float& v : scales) v = scale(random);
    for (float& v : bias) v = normal(random);
  }
  std::vector<float> x, weight;
  std::vector<int8_t> int8_weight;
  std::vector<float> scales, bias;
};

// The kernel's sums against sums in double precision, for every kernel this CPU runs, with
// float32 weights and with int8 weights. Widths: not a multiple of 8 (the portable loop), of 8
// only (AVX2 under AVX-512), of 16, and the head's 512 and 1024. Outputs and rows around the
// kernels' blocks of 4 outputs and 2 or 4 rows, over all the outputs and over a range inside them,
// as a thread's share of a layer is.
TEST(RowKernels, EveryKernelThisCpuRunsSumsAsDoublesDo) {
  std::mt19937 random(7);
  for (const RowKernel kernel : RowKernelsThisCpuRuns()) {
    for (const int64_t in : {1, 12, 24, 48, 512, 1024}) {
      for (const int64_t outputs : {1, 3, 4, 5, 9}) {
        for (const int64_t rows : {1, 2, 3, 4, 5, 7, 8, 9, 16}) {
          const Case c(in, outputs, rows, random);
          for (const bool int8 : {false, true}) {
            for (const bool with_bias : {true, false}) {
              for (const auto& [first, last] : std::vector<std::pair<int64_t, int64_t>>{
                       {0, outputs}, {outputs / 3, outputs - outputs / 3}}) {
                std::vector<float> out(rows * outputs, -1.0F);
                const float* bias = with_bias ? c.bias.data() : nullptr;
                if (int8) {
                  MultiplyRows(kernel, c.x.data(), rows, c.int8_weight.data(), c.scales.data(),
                               bias, out.data(), in, outputs, first, last);
                } else {
                  MultiplyRows(kernel, c.x.data(), rows, c.weight.data(), bias, out.data(), in,
                               outputs, first, last);
                }
                for (int64_t r = 0; r < rows; ++r) {
                  for (int64_t o = 0; o < outputs; ++o) {
                    const std::string where = std::string(RowKernelName(kernel)) +
                                              (int8 ? ", int8, " : ", float32, ") +
                                              std::to_string(in) + " in, output " +
                                              std::to_string(o) + ", row " + std::to_string(r);
                    const float got = out[r * outputs + o];
                    if (o < first || o >= last) {
                      EXPECT_EQ(got, -1.0F) << where << " is outside the range and was written";
                      continue;
                    }
                    double want = with_bias ? c.bias[o] : 0.0;
                    for (int64_t i = 0; i < in; ++i) {
                      const double w =
                          int8 ? static_cast<double>(c.int8_weight[o * in + i]) * c.scales[o]
                               : c.weight[o * in + i];
                      want += w * c.x[r * in + i];
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
