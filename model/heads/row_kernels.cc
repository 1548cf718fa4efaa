#include "model/heads/row_kernels.h"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#define VIDCLF_X86_ROW_KERNELS 1
#endif

namespace vidclf::model {
namespace {

// Partial sums per row in the portable loop: independent sums the compiler turns into SSE lanes.
constexpr int64_t kLanes = 16;

template <typename Weight>
void MultiplyRowsPortable(const float* x, int64_t rows, const Weight* weight, float* out,
                          int64_t in_features, int64_t out_features, int64_t first, int64_t last) {
  for (int64_t o = first; o < last; ++o) {
    const Weight* w = weight + o * in_features;
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = x + r * in_features;
      float partial[kLanes] = {};
      int64_t i = 0;
      for (; i + kLanes <= in_features; i += kLanes) {
        for (int64_t lane = 0; lane < kLanes; ++lane) {
          partial[lane] += static_cast<float>(w[i + lane]) * row[i + lane];
        }
      }
      float sum = 0.0F;
      for (int64_t lane = 0; lane < kLanes; ++lane) sum += partial[lane];
      for (; i < in_features; ++i) sum += static_cast<float>(w[i]) * row[i];
      out[r * out_features + o] = sum;
    }
  }
}

#ifdef VIDCLF_X86_ROW_KERNELS

// Both vector kernels take kOutputs weight rows at a time against kRows input rows: each weight
// vector loaded serves kRows sums, each input vector kOutputs, and the kOutputs * kRows sums are
// independent chains, so the multiply-adds do not wait on one another. A block of weight rows
// (4 x 2-4 KiB) stays in the L1 cache while further rows of the input go past it. int8 weights
// are widened to float as they are loaded: a quarter of the bytes to read for two more
// instructions a vector.
constexpr int64_t kOutputsPerBlock = 4;

// A block reads its rows side by side, a short stretch of each at a time, which the hardware
// prefetcher follows too late for int8 rows: a lone stream's int8 step took 1.12-1.23 ms, and
// 0.94-0.96 with the weights 4 KiB ahead asked for at each stretch (1 KiB: 1.05-1.14; 16 KiB:
// 0.95-0.98). float32 rows, read at the memory's speed already, take as long either way.
constexpr int64_t kPrefetchBytes = 4096;

// Asks for the cache lines kPrefetchBytes past kWeights weights from `weight` on. A block's rows
// lie one after another, so the i-th of n iterations of its loop asks for the i-th n-th of the
// bytes ahead.
template <int64_t kWeights, typename Weight>
inline void PrefetchAhead(const Weight* weight) {
  const char* ahead = reinterpret_cast<const char*>(weight) + kPrefetchBytes;
  for (int64_t line = 0; line < kWeights * static_cast<int64_t>(sizeof(Weight)); line += 64) {
    _mm_prefetch(ahead + line, _MM_HINT_T0);
  }
}

// _mm512_reduce_add_ps would do, but GCC 12 warns inside it (its bug 105593).
__attribute__((target("avx512f"))) float SumAvx512(__m512 v) {
  float lanes[16];
  _mm512_storeu_ps(lanes, v);
  float sum = 0.0F;
  for (const float lane : lanes) sum += lane;
  return sum;
}

__attribute__((target("avx512f"))) inline __m512 LoadAvx512(const float* weight) {
  return _mm512_loadu_ps(weight);
}

// The zero-masked forms with every lane kept: the plain ones trip GCC 12's uninitialised warning
// (the bug above).
__attribute__((target("avx512f"))) inline __m512 LoadAvx512(const int8_t* weight) {
  constexpr __mmask16 kAll = 0xFFFF;
  return _mm512_maskz_cvtepi32_ps(
      kAll,
      _mm512_maskz_cvtepi8_epi32(kAll, _mm_loadu_si128(reinterpret_cast<const __m128i*>(weight))));
}

template <int kOutputs, int kRows, typename Weight>
__attribute__((target("avx512f"))) void BlockAvx512(const float* x, const Weight* weight,
                                                    float* out, int64_t in_features,
                                                    int64_t out_features) {
  __m512 sums[kOutputs][kRows];
  for (auto& output : sums) {
    for (__m512& sum : output) sum = _mm512_setzero_ps();
  }
  for (int64_t i = 0; i < in_features; i += 16) {
    PrefetchAhead<16 * kOutputs>(weight + i * kOutputs);
    __m512 w[kOutputs];
    for (int a = 0; a < kOutputs; ++a) w[a] = LoadAvx512(weight + a * in_features + i);
    for (int r = 0; r < kRows; ++r) {
      const __m512 input = _mm512_loadu_ps(x + r * in_features + i);
      for (int a = 0; a < kOutputs; ++a) sums[a][r] = _mm512_fmadd_ps(w[a], input, sums[a][r]);
    }
  }
  for (int a = 0; a < kOutputs; ++a) {
    for (int r = 0; r < kRows; ++r) out[r * out_features + a] = SumAvx512(sums[a][r]);
  }
}

// 4 outputs x 4 rows: 16 sums, 4 weight vectors and an input vector in AVX-512's 32 registers.
template <int kOutputs, typename Weight>
__attribute__((target("avx512f"))) void RowsAvx512(const float* x, int64_t rows,
                                                   const Weight* weight, float* out,
                                                   int64_t in_features, int64_t out_features) {
  for (int64_t r = 0; r < rows; r += 4) {
    const float* input = x + r * in_features;
    float* sums = out + r * out_features;
    switch (std::min<int64_t>(4, rows - r)) {
      case 4:
        BlockAvx512<kOutputs, 4>(input, weight, sums, in_features, out_features);
        break;
      case 3:
        BlockAvx512<kOutputs, 3>(input, weight, sums, in_features, out_features);
        break;
      case 2:
        BlockAvx512<kOutputs, 2>(input, weight, sums, in_features, out_features);
        break;
      default:
        BlockAvx512<kOutputs, 1>(input, weight, sums, in_features, out_features);
    }
  }
}

template <typename Weight>
__attribute__((target("avx512f"))) void MultiplyRowsAvx512(const float* x, int64_t rows,
                                                           const Weight* weight, float* out,
                                                           int64_t in_features,
                                                           int64_t out_features, int64_t first,
                                                           int64_t last) {
  int64_t o = first;
  for (; o + kOutputsPerBlock <= last; o += kOutputsPerBlock) {
    RowsAvx512<kOutputsPerBlock>(x, rows, weight + o * in_features, out + o, in_features,
                                 out_features);
  }
  for (; o < last; ++o) {
    RowsAvx512<1>(x, rows, weight + o * in_features, out + o, in_features, out_features);
  }
}

__attribute__((target("avx2,fma"))) inline __m256 LoadAvx2(const float* weight) {
  return _mm256_loadu_ps(weight);
}

__attribute__((target("avx2,fma"))) inline __m256 LoadAvx2(const int8_t* weight) {
  return _mm256_cvtepi32_ps(
      _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(weight))));
}

__attribute__((target("avx2,fma"))) float SumAvx2(__m256 v) {
  __m128 sum = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  sum = _mm_add_ps(sum, _mm_movehl_ps(sum, sum));
  return _mm_cvtss_f32(_mm_add_ss(sum, _mm_movehdup_ps(sum)));
}

template <int kOutputs, int kRows, typename Weight>
__attribute__((target("avx2,fma"))) void BlockAvx2(const float* x, const Weight* weight, float* out,
                                                   int64_t in_features, int64_t out_features) {
  __m256 sums[kOutputs][kRows];
  for (auto& output : sums) {
    for (__m256& sum : output) sum = _mm256_setzero_ps();
  }
  for (int64_t i = 0; i < in_features; i += 8) {
    PrefetchAhead<8 * kOutputs>(weight + i * kOutputs);
    __m256 w[kOutputs];
    for (int a = 0; a < kOutputs; ++a) w[a] = LoadAvx2(weight + a * in_features + i);
    for (int r = 0; r < kRows; ++r) {
      const __m256 input = _mm256_loadu_ps(x + r * in_features + i);
      for (int a = 0; a < kOutputs; ++a) sums[a][r] = _mm256_fmadd_ps(w[a], input, sums[a][r]);
    }
  }
  for (int a = 0; a < kOutputs; ++a) {
    for (int r = 0; r < kRows; ++r) out[r * out_features + a] = SumAvx2(sums[a][r]);
  }
}

// 4 outputs x 2 rows: 8 sums, 4 weight vectors and an input vector in AVX2's 16 registers.
template <int kOutputs, typename Weight>
__attribute__((target("avx2,fma"))) void RowsAvx2(const float* x, int64_t rows,
                                                  const Weight* weight, float* out,
                                                  int64_t in_features, int64_t out_features) {
  int64_t r = 0;
  for (; r + 2 <= rows; r += 2) {
    BlockAvx2<kOutputs, 2>(x + r * in_features, weight, out + r * out_features, in_features,
                           out_features);
  }
  if (r < rows) {
    BlockAvx2<kOutputs, 1>(x + r * in_features, weight, out + r * out_features, in_features,
                           out_features);
  }
}

template <typename Weight>
__attribute__((target("avx2,fma"))) void MultiplyRowsAvx2(const float* x, int64_t rows,
                                                          const Weight* weight, float* out,
                                                          int64_t in_features, int64_t out_features,
                                                          int64_t first, int64_t last) {
  int64_t o = first;
  for (; o + kOutputsPerBlock <= last; o += kOutputsPerBlock) {
    RowsAvx2<kOutputsPerBlock>(x, rows, weight + o * in_features, out + o, in_features,
                               out_features);
  }
  for (; o < last; ++o) {
    RowsAvx2<1>(x, rows, weight + o * in_features, out + o, in_features, out_features);
  }
}

#endif  // VIDCLF_X86_ROW_KERNELS

// The sums without bias or scale, through `kernel` where in_features fits its width.
template <typename Weight>
void MultiplyRowsWith(RowKernel kernel, const float* x, int64_t rows, const Weight* weight,
                      float* out, int64_t in_features, int64_t out_features, int64_t first,
                      int64_t last) {
#ifdef VIDCLF_X86_ROW_KERNELS
  if (kernel == RowKernel::kAvx512 && in_features % 16 == 0) {
    MultiplyRowsAvx512(x, rows, weight, out, in_features, out_features, first, last);
    return;
  }
  if (kernel != RowKernel::kPortable && in_features % 8 == 0) {
    MultiplyRowsAvx2(x, rows, weight, out, in_features, out_features, first, last);
    return;
  }
#else
  (void)kernel;
#endif
  MultiplyRowsPortable(x, rows, weight, out, in_features, out_features, first, last);
}

}  // namespace

std::string_view RowKernelName(RowKernel kernel) {
  switch (kernel) {
    case RowKernel::kAvx512:
      return "AVX-512";
    case RowKernel::kAvx2:
      return "AVX2";
    case RowKernel::kPortable:
      break;
  }
  return "portable";
}

std::vector<RowKernel> RowKernelsThisCpuRuns() {
  std::vector<RowKernel> kernels = {RowKernel::kPortable};
#ifdef VIDCLF_X86_ROW_KERNELS
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    kernels.push_back(RowKernel::kAvx2);
  }
  if (__builtin_cpu_supports("avx512f")) kernels.push_back(RowKernel::kAvx512);
#endif
  return kernels;
}

RowKernel FastestRowKernel() {
  static const RowKernel fastest = RowKernelsThisCpuRuns().back();
  return fastest;
}

void MultiplyRows(RowKernel kernel, const float* x, int64_t rows, const float* weight,
                  const float* bias, float* out, int64_t in_features, int64_t out_features,
                  int64_t first, int64_t last) {
  MultiplyRowsWith(kernel, x, rows, weight, out, in_features, out_features, first, last);
  if (bias == nullptr) return;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = first; o < last; ++o) out[r * out_features + o] += bias[o];
  }
}

void MultiplyRows(RowKernel kernel, const float* x, int64_t rows, const int8_t* weight,
                  const float* scales, const float* bias, float* out, int64_t in_features,
                  int64_t out_features, int64_t first, int64_t last) {
  MultiplyRowsWith(kernel, x, rows, weight, out, in_features, out_features, first, last);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = first; o < last; ++o) {
      float& sum = out[r * out_features + o];
      sum = sum * scales[o] + (bias == nullptr ? 0.0F : bias[o]);
    }
  }
}

}  // namespace vidclf::model
