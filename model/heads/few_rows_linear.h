// A linear layer applied to a few rows, as a live stream's step applies each of its head's layers
// to one new frame.
//
// torch::linear hands a few rows to BLAS's matrix-matrix product, which copies the weights into
// its packed layout before using them. A lone stream's step of the 6-layer causal-linear head (48
// MiB of weights, 25 MFLOP) took 4.2-4.7 ms with one intra-op thread, about twice what reading its
// weights takes; with this kernel, which reads each weight row once for all the rows, 2.5-3.0 ms
// (docs/streaming-benchmark.md).
#ifndef VIDCLF_MODEL_HEADS_FEW_ROWS_LINEAR_H_
#define VIDCLF_MODEL_HEADS_FEW_ROWS_LINEAR_H_

#include <torch/torch.h>

#include <cstdint>

namespace vidclf::model {

// Inputs of at most this many rows (the product of all but the last dimension) take the kernel.
// With 4 streams that head's step took 6.4-6.7 ms against 9.2-9.3; by 8 rows the packed product,
// whose arithmetic is vectorised more widely than this portable loop, caught up.
inline constexpr int64_t kMaxFewRows = 4;

// layer(x), equal up to float rounding: through the row kernel where x is float32 on the CPU,
// holds at most kMaxFewRows rows and needs no gradient, through the layer otherwise.
torch::Tensor ApplyLinear(torch::nn::LinearImpl& layer, const torch::Tensor& x);

}  // namespace vidclf::model

#endif  // VIDCLF_MODEL_HEADS_FEW_ROWS_LINEAR_H_
