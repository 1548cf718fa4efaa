// A linear layer applied to a few rows, as a live stream's step applies each of its head's layers
// to one new frame.
//
// torch::linear hands a few rows to BLAS's matrix-matrix product, which copies the weights into
// its packed layout before using them. A lone stream's step of the 6-layer causal-linear head (48
// MiB of weights, 25 MFLOP) took 4.2-4.7 ms with one intra-op thread, about twice what reading its
// weights takes; with a kernel that reads each weight row once for all the rows
// (model/heads/row_kernels.h), 2.5-3.0 ms (docs/streaming-benchmark.md).
#ifndef VIDCLF_MODEL_HEADS_FEW_ROWS_LINEAR_H_
#define VIDCLF_MODEL_HEADS_FEW_ROWS_LINEAR_H_

#include <torch/torch.h>

#include <cstdint>

namespace vidclf::model {

// Inputs of at most this many rows (the product of all but the last dimension) take the row
// kernel; more go to BLAS. Where BLAS caught up with the kernel, in ms per step of that head for B
// streams stepped together, one intra-op thread (vidclf-step-bench built with one kernel forced at
// a time; docs/streaming-benchmark.md):
// - portable: by 8 rows (14.3-14.5 against BLAS's 10.0-10.9);
// - AVX2: by 16 rows (15.4-15.5 against 14.0-14.4), after 7.4-7.8 against 10.0-10.9 at 8;
// - AVX-512: by 32 rows (24.3-24.4 against 24.2-24.5), after 14.2-14.3 against 14.5 at 16.
int64_t MaxFewRows();

// layer(x), equal up to float rounding: through the row kernel where x is float32 on the CPU,
// holds at most MaxFewRows() rows and needs no gradient, through the layer otherwise.
torch::Tensor ApplyLinear(torch::nn::LinearImpl& layer, const torch::Tensor& x);

// A linear layer's weights in int8 with one scale per output row, for a live stream's step, whose
// time is reading the weights: a quarter of the bytes. Symmetric: the largest magnitude of row o
// becomes 127, so each weight is off by at most half of scales[o].
struct Int8Linear {
  torch::Tensor weight;  // [out_features, in_features] int8
  torch::Tensor scales;  // [out_features] float32
  torch::Tensor bias;    // [out_features] float32, or undefined
};

// The layer's float32 weights rounded to int8 rows.
Int8Linear QuantizeRows(const torch::nn::LinearImpl& layer);

// The layer the int8 weights stand for applied to x, [..., in_features] float32 on the CPU
// holding any number of rows, through the row kernel.
torch::Tensor ApplyLinear(const Int8Linear& layer, const torch::Tensor& x);

}  // namespace vidclf::model

#endif  // VIDCLF_MODEL_HEADS_FEW_ROWS_LINEAR_H_
