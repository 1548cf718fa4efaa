// The interface of the heads that turn a sequence of frame embeddings into class logits.
#ifndef VIDCLF_MODEL_HEADS_TEMPORAL_HEAD_H_
#define VIDCLF_MODEL_HEADS_TEMPORAL_HEAD_H_

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace vidclf::model {

// What a head carries from one step of a streamed sequence to the next (see TemporalHead::step
// and head_stream.h). Each head decides what `tensors` hold; callers only pass the state back.
// A default-constructed state means that nothing has been seen yet.
struct HeadState {
  // Frames consumed so far, per sequence.
  int64_t frames_seen = 0;
  std::vector<torch::Tensor> tensors;
};

class TemporalHead : public torch::nn::Module {
 public:
  // embeddings: [B, T, input_size]; lengths: [B] int64, the number of valid (leading) frames of
  // each sequence, 1 <= length <= T. Frames past a sequence's length are padding and never change
  // its output. Returns logits [B, num_classes].
  virtual torch::Tensor forward(const torch::Tensor& embeddings, const torch::Tensor& lengths) = 0;

  // Per-frame logits [B, T, num_classes] for the same input: what the head says of each frame,
  // the output of a segmentation model (heads trained per frame). Frames past a sequence's length
  // get logits that mean nothing. For a causal() head, frame t's are forward() over frames 0..t,
  // so a stream stepped frame by frame gets them one at a time; other heads see the whole
  // sequence on both sides of each frame.
  virtual torch::Tensor forward_frames(const torch::Tensor& embeddings,
                                       const torch::Tensor& lengths) = 0;

  // True when each frame's output depends only on the frames up to it, in a form that a step can
  // continue (the GRU, the bag of frames; a transformer with causal-linear attention).
  virtual bool causal() const { return false; }

  // True when step() continues a sequence exactly, at a cost per new frame that does not grow with
  // the frames seen before: a causal head, over frame differences where it can step them.
  bool has_recurrent_step() const {
    return causal() && (!frame_differences_ || steps_frame_differences());
  }

  // With frame differences the head sees each frame's change from the one before (standardised
  // x_t - x_{t-1}; 0 for a sequence's first frame) instead of the frame: what moves rather than
  // what is there. Segmentation heads, whose segments each have a texture of their own, learn far
  // better from it (docs/results.md, "Segmentation"). Off by default; the model's configuration
  // sets it (ModelConfig::frame_differences).
  void set_frame_differences(bool on) { frame_differences_ = on; }
  bool frame_differences() const { return frame_differences_; }
  // Whether step() takes frame differences (through PrepareStep), keeping the last frame seen.
  virtual bool steps_frame_differences() const { return false; }

  // embeddings: [B, T, input_size], T >= 1 new frames of B sequences whose earlier frames produced
  // `state`. Returns the logits [B, num_classes] of each sequence extended by these frames, equal
  // to forward() over everything seen so far, and the state to pass with the next frames.
  // Throws c10::Error unless has_recurrent_step(), or when the state does not fit the input.
  virtual std::pair<torch::Tensor, HeadState> step(const torch::Tensor& embeddings,
                                                   const HeadState& state);

  // step() for B sequences that each carry their own state: embeddings [B, T, input_size] hold T
  // new frames of each, states[b] is sequence b's state, of one sequence or fresh, and the frames
  // each has seen may differ. Returns the logits [B, num_classes] and each sequence's next state,
  // equal to step() for each sequence alone. Heads that can step them together, in one pass over
  // their weights, do; this default steps them one by one. A server stepping many live streams at
  // once reads the weights once for all of them. Throws as step() does.
  virtual std::pair<torch::Tensor, std::vector<HeadState>> StepEach(
      const torch::Tensor& embeddings, const std::vector<HeadState>& states);

  // From now on, steps of one new frame per stream apply int8 copies of the head's weights (made
  // from them as they are now), where the head has such a step: the transformer's with
  // causal-linear attention (TransformerHeadImpl). Returns whether it does; other heads keep
  // float32 throughout.
  virtual bool UseInt8StepWeights() { return false; }

  // Embeddings are standardised with these before anything else; the trainer sets them from its
  // training set (buffers, so they travel with the weights). Identity by default.
  torch::Tensor embedding_mean, embedding_std;

 protected:
  explicit TemporalHead(int64_t input_size);

  // Checks the shapes above (throws c10::Error naming what was expected) and returns the
  // standardised embeddings, or their frame differences. The second form is for step(), which
  // has no lengths; it throws with frame differences (heads that step them use PrepareStep).
  torch::Tensor CheckAndStandardise(const torch::Tensor& embeddings, const torch::Tensor& lengths,
                                    const char* head_name) const;
  torch::Tensor CheckAndStandardise(const torch::Tensor& embeddings, const char* head_name) const;

  // step()'s input, for heads that step frame differences. With them, a state's last tensor is
  // the last standardised frame it saw ([1, B, input_size]: batch in dimension 1, as JoinStates
  // may join it), from which the first new frame's change is taken; a fresh state's first frame
  // has no change.
  struct StepInput {
    torch::Tensor x;                 // [B, T, input_size]: standardised, or their differences
    std::vector<torch::Tensor> own;  // the state's tensors but that frame: the head's own
    torch::Tensor last_frame;        // with frame differences, to keep in the next state
  };
  StepInput PrepareStep(const torch::Tensor& embeddings, const HeadState& state,
                        const char* head_name) const;
  // The state after a step of `frames` frames from `before`: the head's `own` tensors, then the
  // last frame `input` saw (with frame differences).
  static HeadState NextState(const HeadState& before, int64_t frames,
                             std::vector<torch::Tensor> own, const StepInput& input);

  // For StepEach: the k-th tensors of `states` (one sequence each) joined along `batch_dim`, a
  // fresh state counting as zeros shaped like the others' (which a fresh step equals); empty when
  // every state is fresh. Throws c10::Error naming `head_name` for states that do not match.
  static std::vector<torch::Tensor> JoinStates(const std::vector<HeadState>& states,
                                               int64_t batch_dim, const char* head_name);
  // The inverse: one state per sequence of `joined` along `batch_dim`, each having seen what it
  // had in `before` and `frames` more.
  static std::vector<HeadState> SplitStates(const std::vector<torch::Tensor>& joined,
                                            int64_t batch_dim, const std::vector<HeadState>& before,
                                            int64_t frames);

 private:
  // Checks embeddings are [B, T, input_size] and standardises them.
  torch::Tensor Standardised(const torch::Tensor& embeddings, const char* head_name) const;

  int64_t input_size_;
  bool frame_differences_ = false;
};

// Throws c10::Error, naming `who`, unless embeddings are [B, T, D] with B = states.size() >= 1.
void CheckOneStatePerSequence(const torch::Tensor& embeddings, const std::vector<HeadState>& states,
                              const char* who);

// Steps each of B sequences alone, with `step_one` given its embeddings [1, T, input_size] and
// its state, and joins their logits: StepEach for heads that cannot step sequences together.
std::pair<torch::Tensor, std::vector<HeadState>> StepEachAlone(
    const torch::Tensor& embeddings, const std::vector<HeadState>& states,
    const std::function<std::pair<torch::Tensor, HeadState>(const torch::Tensor&,
                                                            const HeadState&)>& step_one);

}  // namespace vidclf::model

#endif  // VIDCLF_MODEL_HEADS_TEMPORAL_HEAD_H_
