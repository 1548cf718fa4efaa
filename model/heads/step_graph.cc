#include "model/heads/step_graph.h"

#ifdef VIDCLF_TORCH_CUDA

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

namespace vidclf::model {

TransformerStepGraph::TransformerStepGraph(TransformerHeadImpl& head, int64_t batch)
    : head_(head), batch_(batch) {
  TORCH_CHECK(head_.has_recurrent_step(), "only a head with a recurrent step can be captured");
  TORCH_CHECK(!head_.is_training(), "capture the step of a head in eval mode");
  TORCH_CHECK(batch_ >= 1, "a captured step needs a batch of at least 1; got ", batch_);
  const torch::TensorOptions options = head_.classifier->weight.options();
  TORCH_CHECK(options.device().is_cuda(), "a CUDA graph needs the head on a CUDA device; it is on ",
              options.device());
  torch::InferenceMode inference;
  const c10::cuda::CUDAGuard device_guard(options.device());

  frame_ = torch::zeros({batch_, 1, head_.options.input_size()}, options);
  if (head_.options.positional_encoding()) {
    position_ = torch::zeros({1, head_.options.d_model()}, options);
  }
  frames_seen_ = torch::ones({}, options);
  // The state's shapes, from one step of fresh streams.
  const std::vector<torch::Tensor> fresh =
      head_.StepStandardised(frame_, position_, {}, frames_seen_).second;
  int64_t total = 0;
  for (const torch::Tensor& t : fresh) total += t.numel();
  state_ = torch::zeros({total}, options);
  int64_t offset = 0;
  for (const torch::Tensor& t : fresh) {
    state_views_.push_back(state_.slice(0, offset, offset + t.numel()).view(t.sizes()));
    offset += t.numel();
  }

  // Capture runs on a side stream, after warm-up steps there that create cuBLAS's handle and
  // workspace (which capture cannot). Thread-local mode leaves other threads free to use the GPU.
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, options.device().index());
  c10::cuda::getCurrentCUDAStream(options.device().index()).synchronize();
  {
    const c10::cuda::CUDAStreamGuard stream_guard(side);
    for (int i = 0; i < 3; ++i) StepBuffers();
    side.synchronize();
    graph_.capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
    logits_ = StepBuffers();
    graph_.capture_end();
    side.synchronize();
  }
}

torch::Tensor TransformerStepGraph::StepBuffers() {
  const torch::Tensor standardised = (frame_ - head_.embedding_mean) / head_.embedding_std;
  auto [logits, next] = head_.StepStandardised(standardised, position_, state_views_, frames_seen_);
  for (size_t i = 0; i < next.size(); ++i) state_views_[i].copy_(next[i]);
  return logits;
}

std::pair<torch::Tensor, HeadState> TransformerStepGraph::Step(const torch::Tensor& embeddings,
                                                               const HeadState& state) {
  TORCH_CHECK(embeddings.dim() == 3 && embeddings.size(0) == batch_ && embeddings.size(1) >= 1 &&
                  embeddings.size(2) == head_.options.input_size(),
              "this captured step expects embeddings shaped [", batch_, ", T >= 1, ",
              head_.options.input_size(), "]; got ", embeddings.sizes());
  TORCH_CHECK(state.tensors.empty() || state.tensors.size() == state_views_.size(),
              "transformer head state must hold ", state_views_.size(), " tensors; got ",
              state.tensors.size());
  torch::InferenceMode inference;
  const c10::cuda::CUDAGuard device_guard(state_.device());
  const int64_t frames = embeddings.size(1);
  torch::Tensor positions;
  if (position_.defined()) {
    positions = SinusoidalPositionalEncoding(frames, head_.options.d_model(), state.frames_seen)
                    .to(state_.device());
  }

  const std::lock_guard<std::mutex> lock(mutex_);
  if (state.tensors.empty()) {
    state_.zero_();
  } else {
    std::vector<torch::Tensor> flat;
    for (size_t i = 0; i < state.tensors.size(); ++i) {
      TORCH_CHECK(state.tensors[i].sizes() == state_views_[i].sizes(),
                  "transformer head state tensor ", i, " has shape ", state.tensors[i].sizes(),
                  "; this head and batch need ", state_views_[i].sizes());
      flat.push_back(state.tensors[i].reshape({-1}));
    }
    torch::cat_out(state_, flat);
  }
  for (int64_t t = 0; t < frames; ++t) {
    frame_.copy_(embeddings.slice(1, t, t + 1));
    if (position_.defined()) position_.copy_(positions.slice(0, t, t + 1));
    frames_seen_.fill_(static_cast<double>(state.frames_seen + t + 1));
    graph_.replay();
  }
  const torch::Tensor saved = state_.clone();
  HeadState next{state.frames_seen + frames, {}};
  int64_t offset = 0;
  for (const torch::Tensor& view : state_views_) {
    next.tensors.push_back(saved.slice(0, offset, offset + view.numel()).view(view.sizes()));
    offset += view.numel();
  }
  return {logits_.clone(), std::move(next)};
}

}  // namespace vidclf::model

#endif  // VIDCLF_TORCH_CUDA
