#include "model/heads/head_stream.h"

#include <algorithm>

namespace vidclf::model {

std::pair<torch::Tensor, HeadState> StepHead(TemporalHead& head, const SlidingWindowOptions& window,
                                             const torch::Tensor& embeddings,
                                             const HeadState& state) {
  if (head.has_recurrent_step()) return head.step(embeddings, state);

  TORCH_CHECK(window.window_frames >= 1 && window.stride_frames >= 1 &&
                  window.stride_frames <= window.window_frames,
              "sliding window needs 1 <= stride_frames <= window_frames; got window ",
              window.window_frames, ", stride ", window.stride_frames);
  TORCH_CHECK(embeddings.dim() == 3 && embeddings.size(1) >= 1,
              "streamed embeddings must be [B, T, D] with T >= 1 new frames; got ",
              embeddings.sizes());
  // tensors: the latest frames [B, <= window, D], then the logits of the last evaluation.
  TORCH_CHECK(state.tensors.empty() || state.tensors.size() == 2,
              "sliding-window state must hold frames and logits; got ", state.tensors.size(),
              " tensors");
  torch::Tensor frames = embeddings;
  if (!state.tensors.empty()) {
    const torch::Tensor& previous = state.tensors.front();
    TORCH_CHECK(previous.size(0) == embeddings.size(0) && previous.size(2) == embeddings.size(2),
                "sliding-window state holds frames ", previous.sizes(),
                " that do not fit new embeddings ", embeddings.sizes());
    frames = torch::cat({previous, embeddings}, /*dim=*/1);
  }
  const int64_t kept = std::min(window.window_frames, frames.size(1));
  frames = frames.slice(/*dim=*/1, frames.size(1) - kept).contiguous();

  const int64_t seen_before = state.frames_seen;
  const int64_t seen = seen_before + embeddings.size(1);
  const bool evaluate =
      state.tensors.empty() || seen / window.stride_frames > seen_before / window.stride_frames;
  torch::Tensor logits = state.tensors.empty() ? torch::Tensor() : state.tensors.back();
  if (evaluate) {
    const torch::Tensor lengths =
        torch::full({frames.size(0)}, kept, torch::dtype(torch::kLong).device(frames.device()));
    logits = head.forward(frames, lengths);
  }
  return {logits, HeadState{seen, {frames, logits}}};
}

std::pair<torch::Tensor, std::vector<HeadState>> StepHeadEach(
    TemporalHead& head, const SlidingWindowOptions& window, const torch::Tensor& embeddings,
    const std::vector<HeadState>& states) {
  if (head.has_recurrent_step()) return head.StepEach(embeddings, states);
  return StepEachAlone(embeddings, states,
                       [&](const torch::Tensor& frames, const HeadState& state) {
                         return StepHead(head, window, frames, state);
                       });
}

}  // namespace vidclf::model
