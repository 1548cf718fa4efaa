// A baseline head that ignores frame order: the mean of the (standardised) frame embeddings goes
// through one linear layer. Classes that differ only in the order of their frames (fade in and
// fade out) are beyond it by construction, which is what it is for: it shows how much of a
// temporal head's accuracy comes from order.
#ifndef VIDCLF_MODEL_HEADS_BAG_OF_FRAMES_HEAD_H_
#define VIDCLF_MODEL_HEADS_BAG_OF_FRAMES_HEAD_H_

#include <torch/torch.h>

#include <cstdint>
#include <utility>

#include "model/heads/temporal_head.h"

namespace vidclf::model {

class BagOfFramesHeadImpl : public TemporalHead {
 public:
  BagOfFramesHeadImpl(int64_t input_size, int64_t num_classes);

  // See TemporalHead::forward.
  torch::Tensor forward(const torch::Tensor& embeddings, const torch::Tensor& lengths) override;
  // The classifier on each prefix's mean.
  torch::Tensor forward_frames(const torch::Tensor& embeddings,
                               const torch::Tensor& lengths) override;

  // Recurrent: the state holds the running sum of the standardised embeddings (or of their
  // differences, and then the last frame seen) [B, input_size].
  bool causal() const override { return true; }
  bool steps_frame_differences() const override { return true; }
  std::pair<torch::Tensor, HeadState> step(const torch::Tensor& embeddings,
                                           const HeadState& state) override;

  torch::nn::Linear classifier{nullptr};
};
TORCH_MODULE(BagOfFramesHead);

}  // namespace vidclf::model

#endif  // VIDCLF_MODEL_HEADS_BAG_OF_FRAMES_HEAD_H_
