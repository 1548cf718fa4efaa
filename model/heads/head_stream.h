// Streaming classification with any head: a live feed sends frame embeddings a few at a time and
// wants updated logits after each batch, at a cost per frame that does not grow with the feed's
// length.
//
// Heads with a recurrent step (the GRU; a transformer with causal-linear attention) continue their
// state exactly: the logits equal forward() over every frame seen. The others re-run forward()
// over a sliding window of the latest `window_frames` frames every `stride_frames` frames, and
// return the last window's logits in between; their cost per frame is bounded by the window.
#ifndef VIDCLF_MODEL_HEADS_HEAD_STREAM_H_
#define VIDCLF_MODEL_HEADS_HEAD_STREAM_H_

#include <torch/torch.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "model/heads/temporal_head.h"

namespace vidclf::model {

struct SlidingWindowOptions {
  // Frames the head sees at once; the frames before them no longer count.
  int64_t window_frames = 16;
  // The window is re-evaluated each time the frames seen pass a multiple of this (1 <= stride <=
  // window).
  int64_t stride_frames = 4;
};

// embeddings: [B, T, input_size], T >= 1 new frames of B streams whose earlier frames produced
// `state` (default-constructed at the start). Returns the current logits [B, num_classes] and the
// state to pass with the next frames.
//
// Without a recurrent step, the logits are those of forward() over the last min(window_frames,
// frames seen) frames as of the end of the latest step that crossed a multiple of stride_frames
// (or the first step). The state then holds those frames and logits.
//
// Throws c10::Error for bad shapes, a state from another head or batch, or invalid options.
std::pair<torch::Tensor, HeadState> StepHead(TemporalHead& head, const SlidingWindowOptions& window,
                                             const torch::Tensor& embeddings,
                                             const HeadState& state);

// StepHead for B streams that each carry their own state (TemporalHead::StepEach): embeddings
// [B, T, input_size], states[b] stream b's. A head with a recurrent step steps them together, in
// one pass over its weights; a sliding window steps each stream alone. Returns the logits
// [B, num_classes] and each stream's next state. Throws as StepHead does.
std::pair<torch::Tensor, std::vector<HeadState>> StepHeadEach(TemporalHead& head,
                                                              const SlidingWindowOptions& window,
                                                              const torch::Tensor& embeddings,
                                                              const std::vector<HeadState>& states);

}  // namespace vidclf::model

#endif  // VIDCLF_MODEL_HEADS_HEAD_STREAM_H_
