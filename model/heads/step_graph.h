// A recurrent transformer head's one-frame step, captured once as a CUDA graph and replayed for
// every frame of a live stream.
//
// Launched operation by operation, the 6-layer causal-linear head's step costs 3.5 ms on an H100,
// about 50 times what reading its weights takes (docs/gpu-benchmark.md): each of its few hundred
// small kernels pays a pass through LibTorch's dispatcher and a launch. A replay launches the
// captured kernels in one call. Only LibTorch built with CUDA has graphs, hence the guard.
#ifndef VIDCLF_MODEL_HEADS_STEP_GRAPH_H_
#define VIDCLF_MODEL_HEADS_STEP_GRAPH_H_

#ifdef VIDCLF_TORCH_CUDA

#include <ATen/cuda/CUDAGraph.h>
#include <torch/torch.h>

#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "model/heads/transformer_head.h"

namespace vidclf::model {

class TransformerStepGraph {
 public:
  // Captures one frame's step of `head` for `batch` streams. The head must be in eval mode on a
  // CUDA device, have a recurrent step, and outlive this object. Throws c10::Error otherwise, or
  // when capture fails.
  TransformerStepGraph(TransformerHeadImpl& head, int64_t batch);

  TransformerStepGraph(const TransformerStepGraph&) = delete;
  TransformerStepGraph& operator=(const TransformerStepGraph&) = delete;

  // As head.step(embeddings, state), for embeddings [batch, T, input_size]: one replay per frame,
  // so equal up to rounding. Callers take turns, as replays share the graph's buffers. Throws
  // c10::Error for a shape or state that does not fit.
  std::pair<torch::Tensor, HeadState> Step(const torch::Tensor& embeddings, const HeadState& state);

 private:
  // One frame's step from the static buffers; updates state_ in place, returns the logits.
  torch::Tensor StepBuffers();

  TransformerHeadImpl& head_;
  const int64_t batch_;
  std::mutex mutex_;
  at::cuda::CUDAGraph graph_;
  // The graph's inputs: one frame's embeddings [batch, 1, input_size], its position encoding
  // [1, d_model] (undefined without positions) and the frames seen after it (a scalar).
  torch::Tensor frame_, position_, frames_seen_;
  // The state, flat, and the head's state tensors as views of it: one copy moves it in or out.
  torch::Tensor state_;
  std::vector<torch::Tensor> state_views_;
  torch::Tensor logits_;  // the graph's output
};

}  // namespace vidclf::model

#endif  // VIDCLF_TORCH_CUDA

#endif  // VIDCLF_MODEL_HEADS_STEP_GRAPH_H_
