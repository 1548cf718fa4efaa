// The GRU temporal head of seed 004: a stacked GRU over frame embeddings whose last valid output
// goes through Linear -> ReLU -> Linear to class logits.
#ifndef VIDCLF_MODEL_HEADS_GRU_HEAD_H_
#define VIDCLF_MODEL_HEADS_GRU_HEAD_H_

#include <torch/torch.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "model/heads/temporal_head.h"

namespace vidclf::model {

struct GruHeadOptions {
  explicit GruHeadOptions(int64_t num_classes) : num_classes_(num_classes) {}

  /// Number of output classes.
  TORCH_ARG(int64_t, num_classes);
  /// Width of each frame embedding. Default: 512 (ResNet18).
  TORCH_ARG(int64_t, input_size) = 512;
  /// GRU hidden size. Default: 32 (seed 004).
  TORCH_ARG(int64_t, hidden_size) = 32;
  /// Stacked GRU layers. Default: 2 (seed 004).
  TORCH_ARG(int64_t, num_layers) = 2;
  /// Width of the classifier's hidden layer. Default: 16 (seed 004).
  TORCH_ARG(int64_t, mlp_hidden_size) = 16;
  /// Dropout on the standardised embeddings while training. Default: 0 (seed 004 has none).
  /// The head's input is 512 features of a frozen backbone and it overfits small data sets.
  TORCH_ARG(double, input_dropout) = 0.0;
};

class GruHeadImpl : public TemporalHead {
 public:
  explicit GruHeadImpl(const GruHeadOptions& options);

  // See TemporalHead::forward.
  torch::Tensor forward(const torch::Tensor& embeddings, const torch::Tensor& lengths) override;
  // The classifier on every step's output.
  torch::Tensor forward_frames(const torch::Tensor& embeddings,
                               const torch::Tensor& lengths) override;

  // Causal, with a recurrent step: the state holds the GRU's hidden state [num_layers, B,
  // hidden_size], and over frame differences the last frame seen.
  bool causal() const override { return true; }
  bool steps_frame_differences() const override { return true; }
  std::pair<torch::Tensor, HeadState> step(const torch::Tensor& embeddings,
                                           const HeadState& state) override;
  // One step of the GRU over the sequences' hidden states joined.
  std::pair<torch::Tensor, std::vector<HeadState>> StepEach(
      const torch::Tensor& embeddings, const std::vector<HeadState>& states) override;

  GruHeadOptions options;
  torch::nn::GRU gru{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};

 private:
  torch::Tensor DropInput(const torch::Tensor& x) const;
};
TORCH_MODULE(GruHead);

}  // namespace vidclf::model

#endif  // VIDCLF_MODEL_HEADS_GRU_HEAD_H_
