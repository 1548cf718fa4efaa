// The interface of the heads that turn a sequence of frame embeddings into class logits.
#ifndef VIDCLF_MODEL_HEADS_TEMPORAL_HEAD_H_
#define VIDCLF_MODEL_HEADS_TEMPORAL_HEAD_H_

#include <torch/torch.h>

#include <cstdint>

namespace vidclf::model {

class TemporalHead : public torch::nn::Module {
 public:
  // embeddings: [B, T, input_size]; lengths: [B] int64, the number of valid (leading) frames of
  // each sequence, 1 <= length <= T. Frames past a sequence's length are padding and never change
  // its output. Returns logits [B, num_classes].
  virtual torch::Tensor forward(const torch::Tensor& embeddings, const torch::Tensor& lengths) = 0;

  // Embeddings are standardised with these before anything else; the trainer sets them from its
  // training set (buffers, so they travel with the weights). Identity by default.
  torch::Tensor embedding_mean, embedding_std;

 protected:
  explicit TemporalHead(int64_t input_size);

  // Checks the shapes above (throws c10::Error naming what was expected) and returns the
  // standardised embeddings.
  torch::Tensor CheckAndStandardise(const torch::Tensor& embeddings, const torch::Tensor& lengths,
                                    const char* head_name) const;

 private:
  int64_t input_size_;
};

}  // namespace vidclf::model

#endif  // VIDCLF_MODEL_HEADS_TEMPORAL_HEAD_H_
