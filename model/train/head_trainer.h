// Trains a temporal head on cached frame embeddings (the backbone stays frozen, so each video is
// embedded once, not once per epoch).
#ifndef VIDCLF_MODEL_TRAIN_HEAD_TRAINER_H_
#define VIDCLF_MODEL_TRAIN_HEAD_TRAINER_H_

#include <torch/torch.h>

#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "model/heads/temporal_head.h"

namespace vidclf::model {

// A labelled set of embedded videos, padded to a common length.
struct EmbeddingSet {
  torch::Tensor embeddings;  // [N, T, D] float
  torch::Tensor lengths;     // [N] int64, valid frames of each video
  torch::Tensor labels;      // [N] int64 class indices
};

struct HeadTrainingOptions {
  int epochs = 80;
  int batch_size = 16;  // seed 004's GRU batch size (its transformer used 24)
  double learning_rate = 3e-3;
  // Seeds the shuffling and the head's initial weights.
  uint64_t seed = 7;
  // Called after each epoch with (epoch, mean training loss); may be empty.
  std::function<void(int, double)> on_epoch;
};

struct TrainingReport {
  double final_loss = 0;
  double train_accuracy = 0;
};

// Fits `head` (Adam, cross-entropy) to `train`, after setting its embedding standardisation from
// `train`'s valid frames. Leaves the head in eval mode.
absl::StatusOr<TrainingReport> TrainHead(TemporalHead& head, const EmbeddingSet& train,
                                         const HeadTrainingOptions& options);

// Fraction of `set` whose most probable class is its label. Puts the head in eval mode.
double Accuracy(TemporalHead& head, const EmbeddingSet& set);

}  // namespace vidclf::model

#endif  // VIDCLF_MODEL_TRAIN_HEAD_TRAINER_H_
