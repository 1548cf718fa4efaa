// The transformer-encoder temporal head of seed 004: frame embeddings (optionally projected to a
// smaller d_model) plus sinusoidal positions, a stack of encoder layers whose self-attention
// mechanism is chosen by name (attention/registry.h), pooling, and a linear classifier.
//
// Seed 004's defaults: d_model 512, 8 heads, 6 layers, FFN 1024, post-norm
// (Z = LayerNorm(X + SelfAttn(X)); Y = LayerNorm(Z + FFN(Z))), sinusoidal positions.
// Pooling (not stated in the seed) is the mean over valid frames, or a learned class token.
#ifndef VIDCLF_MODEL_HEADS_TRANSFORMER_HEAD_H_
#define VIDCLF_MODEL_HEADS_TRANSFORMER_HEAD_H_

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/attention/attention.h"
#include "model/heads/few_rows_linear.h"
#include "model/heads/temporal_head.h"

namespace vidclf::model {

// How the encoder's outputs become one vector per video.
enum class Pooling {
  kMean,  // masked mean over the valid frames
  kCls,   // a learned class token placed first
  // The last valid frame's output: with causal attention, what the newest frame makes of those
  // before it, so that a stream's answer follows its recent frames (online segmentation).
  kLast,
};

// "mean", "cls" or "last".
std::string PoolingName(Pooling pooling);
// INVALID_ARGUMENT for any other name.
absl::StatusOr<Pooling> ParsePooling(absl::string_view name);

// PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)) for positions
// first_position .. first_position + length - 1 (the first frame is position 0). Returns
// [length, d_model] float; d_model must be even.
torch::Tensor SinusoidalPositionalEncoding(int64_t length, int64_t d_model,
                                           int64_t first_position = 0);

struct TransformerHeadOptions {
  explicit TransformerHeadOptions(int64_t num_classes) : num_classes_(num_classes) {}

  /// Number of output classes.
  TORCH_ARG(int64_t, num_classes);
  /// Width of each frame embedding. Default: 512 (ResNet18).
  TORCH_ARG(int64_t, input_size) = 512;
  /// Model width; a linear projection maps input_size to it when they differ. Default: 512.
  TORCH_ARG(int64_t, d_model) = 512;
  /// Attention heads; must divide d_model. Default: 8.
  TORCH_ARG(int64_t, num_heads) = 8;
  /// Encoder layers. Default: 6.
  TORCH_ARG(int64_t, num_layers) = 6;
  /// Hidden width of each layer's feed-forward network. Default: 1024.
  TORCH_ARG(int64_t, ffn_size) = 1024;
  /// Layer norm before each sub-layer (pre-norm) instead of after the residual (post-norm).
  TORCH_ARG(bool, pre_norm) = false;
  /// Masked mean over valid frames, or a learned class token. Default: mean.
  TORCH_ARG(Pooling, pooling) = Pooling::kMean;
  /// Adds sinusoidal positions to the inputs. Without them the encoder sees a set, not a
  /// sequence (a baseline for order-dependent classes). Default: true.
  TORCH_ARG(bool, positional_encoding) = true;
  /// Dropout in training, after attention and in the FFN. Default: 0.1 (PyTorch's).
  TORCH_ARG(double, dropout) = 0.1;
  /// The attention mechanism and its options; head_dim, value_dim and num_heads are derived from
  /// d_model and num_heads.
  TORCH_ARG(attention::AttentionOptions, attention) = {};
};

// How the one-frame step applies a linear layer: its float32 weights (ApplyLinear), or an int8
// copy of them where the head made one (TransformerHeadImpl::UseInt8StepWeights).
class StepLinears {
 public:
  // Copies `layer`'s weights as they are now into int8 rows.
  void AddInt8(const torch::nn::LinearImpl& layer);
  bool has_int8() const { return !int8_.empty(); }
  torch::Tensor operator()(torch::nn::LinearImpl& layer, const torch::Tensor& x) const;

 private:
  std::unordered_map<const torch::nn::LinearImpl*, Int8Linear> int8_;
};

// Multi-head self-attention: the Q, K, V and output projections around an inner mechanism.
class SelfAttentionImpl : public torch::nn::Module {
 public:
  SelfAttentionImpl(int64_t d_model, int64_t num_heads,
                    std::shared_ptr<attention::AttentionMechanism> mechanism);
  // x: [B, T, d_model]; mask: [B, T] bool, true for valid frames. Returns [B, T, d_model].
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask);
  // Streaming form, for a mechanism with a recurrent form: x [B, T, d_model] are the next frames
  // after those that produced `state`. Throws c10::Error for any other mechanism.
  std::pair<torch::Tensor, attention::AttentionState> step(const torch::Tensor& x,
                                                           const attention::AttentionState& state);
  // step() for one new frame in each of B sequences with states of their own, x [B, 1, d_model],
  // through the mechanism's forward_one_frame_each() and `linears`. Throws c10::Error for a
  // mechanism without one.
  std::pair<torch::Tensor, std::vector<attention::AttentionState>> StepOneFrameEach(
      const torch::Tensor& x, const std::vector<attention::AttentionState>& states,
      const StepLinears& linears);

  int64_t num_heads;
  torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr}, output{nullptr};
  std::shared_ptr<attention::AttentionMechanism> mechanism;

 private:
  // [B, T, d_model] -> [B, H, T, d_model / H], and the mechanism's output back through `output`.
  torch::Tensor SplitHeads(const torch::Tensor& t) const;
  torch::Tensor MergeHeads(const torch::Tensor& mixed);
};
TORCH_MODULE(SelfAttention);

class EncoderLayerImpl : public torch::nn::Module {
 public:
  EncoderLayerImpl(const TransformerHeadOptions& options,
                   std::shared_ptr<attention::AttentionMechanism> mechanism);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask);
  // See SelfAttentionImpl::step: everything but attention works frame by frame.
  std::pair<torch::Tensor, attention::AttentionState> step(const torch::Tensor& x,
                                                           const attention::AttentionState& state);
  // See SelfAttentionImpl::StepOneFrameEach.
  std::pair<torch::Tensor, std::vector<attention::AttentionState>> StepOneFrameEach(
      const torch::Tensor& x, const std::vector<attention::AttentionState>& states,
      const StepLinears& linears);

  bool pre_norm;
  SelfAttention self_attention{nullptr};
  torch::nn::Linear linear1{nullptr}, linear2{nullptr};
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  torch::nn::Dropout dropout{nullptr};

 private:
  // The residual sub-layers around `attend` (self-attention over its normalised or raw input).
  torch::Tensor AddSublayers(const torch::Tensor& x,
                             const std::function<torch::Tensor(const torch::Tensor&)>& attend);
};
TORCH_MODULE(EncoderLayer);

class TransformerHeadImpl : public TemporalHead {
 public:
  // Throws c10::Error for inconsistent options or an unknown attention type.
  explicit TransformerHeadImpl(const TransformerHeadOptions& options);

  // See TemporalHead::forward.
  torch::Tensor forward(const torch::Tensor& embeddings, const torch::Tensor& lengths) override;
  // The classifier on every frame's output, or with a recurrent step on each prefix's pooled
  // vector (the running mean, or the frame's own output with "last" pooling).
  torch::Tensor forward_frames(const torch::Tensor& embeddings,
                               const torch::Tensor& lengths) override;

  // Causal, with a recurrent step, when every layer's mechanism has a recurrent form
  // (causal-linear, which implies mean or last pooling): the state holds each layer's (S, Z) and
  // the running sum of the last layer's outputs, whose mean is the pooled vector (with last
  // pooling, the newest output). Positions continue from the frames seen.
  bool causal() const override;
  std::pair<torch::Tensor, HeadState> step(const torch::Tensor& embeddings,
                                           const HeadState& state) override;
  // One step over the sequences' states, each sequence at its own positions: joined, or for one
  // frame each on the CPU without gradients, through StepOneFrameEach.
  std::pair<torch::Tensor, std::vector<HeadState>> StepEach(
      const torch::Tensor& embeddings, const std::vector<HeadState>& states) override;
  // step()'s arithmetic alone, for capture in a CUDA graph (step_graph.h): tensor operations on
  // the input's device with no host synchronisation. standardised: [B, T, input_size] embeddings
  // after standardisation; positions: their encodings [T, d_model] (or [B, T, d_model]), or
  // undefined without positional encoding; state: step()'s state tensors, or empty for fresh
  // streams; frames_seen: the frames seen once these are stepped, a scalar tensor (or [B, 1]).
  // Returns the logits and the next state tensors. Throws c10::Error for a state that does not fit.
  std::pair<torch::Tensor, std::vector<torch::Tensor>> StepStandardised(
      const torch::Tensor& standardised, const torch::Tensor& positions,
      const std::vector<torch::Tensor>& state, const torch::Tensor& frames_seen);
  // Whether step() and StepEach take StepOneFrameEach for these embeddings: one frame each,
  // float32 on the CPU, no gradients, dropout off (eval mode), and every layer's mechanism
  // has_one_frame_step() (causal-linear).
  bool StepsOneFrameWrittenOut(const torch::Tensor& embeddings) const;
  // See TemporalHead::UseInt8StepWeights: where every layer's mechanism has_one_frame_step(),
  // StepOneFrameEach applies int8 copies of every linear layer (few_rows_linear.h's Int8Linear:
  // 12 MiB more for seed 004's head, whose float32 weights stay for everything else), and a lone
  // stream's step reads a quarter of the bytes. Steps of several frames, whole sequences and
  // other devices keep the float32 weights, so their outputs no longer match the one-frame
  // step's exactly (docs/streaming-benchmark.md measures the difference).
  bool UseInt8StepWeights() override;
  bool int8_step_weights() const { return step_linears_.has_int8(); }

  TransformerHeadOptions options;
  torch::nn::Linear input_projection{nullptr};  // empty when input_size == d_model
  torch::Tensor class_token;                    // [d_model], undefined unless pooling == "cls"
  torch::nn::ModuleList layers{nullptr};
  torch::nn::LayerNorm final_norm{nullptr};  // pre-norm stacks end with one more norm
  torch::nn::Linear classifier{nullptr};

 private:
  // StepEach for one frame per sequence without joining the states: each layer's attention reads
  // each sequence's (S, Z) where it lies and writes the next once, in a few operations where
  // joined tensor operations took a dozen. The 6-layer head's step, one intra-op thread: a lone
  // stream 2.1 ms against 2.5-2.6 joined, 16 streams 10.1-10.7 against 12.5-13.5.
  std::pair<torch::Tensor, std::vector<HeadState>> StepOneFrameEach(
      const torch::Tensor& standardised, const torch::Tensor& positions,
      const std::vector<HeadState>& states);
  // Whether every layer's mechanism has_one_frame_step() (causal-linear).
  bool EveryLayerStepsOneFrame() const;
  // The encoder's outputs [B, T', d_model] (T' = T + 1 with a class token, first) and which of
  // them are valid [B, T'].
  std::pair<torch::Tensor, torch::Tensor> Encode(const torch::Tensor& embeddings,
                                                 const torch::Tensor& lengths);
  // What a step keeps of the last layer's outputs x [B, T, d_model] to pool: their sum added to
  // `before`'s (mean pooling), or the newest (last pooling).
  torch::Tensor PooledState(const torch::Tensor& x, const torch::Tensor& before) const;

  StepLinears step_linears_;
};
TORCH_MODULE(TransformerHead);

}  // namespace vidclf::model

#endif  // VIDCLF_MODEL_HEADS_TRANSFORMER_HEAD_H_
