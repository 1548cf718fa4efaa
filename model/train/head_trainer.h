// Trains a temporal head on cached frame embeddings (the backbone stays frozen, so each video is
// embedded once, not once per epoch).
#ifndef VIDCLF_MODEL_TRAIN_HEAD_TRAINER_H_
#define VIDCLF_MODEL_TRAIN_HEAD_TRAINER_H_

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "model/heads/temporal_head.h"

namespace vidclf::model {

// A labelled set of embedded videos, padded to a common length.
struct EmbeddingSet {
  torch::Tensor embeddings;  // [N, T, D] float
  torch::Tensor lengths;     // [N] int64, valid frames of each video
  torch::Tensor labels;      // [N] int64 class indices
  // Set for training per frame (segmentation): each frame's class [N, T] int64, -1 where a frame
  // has none (padding, or a moment no segment covers), which no loss or measure counts.
  torch::Tensor frame_labels;

  int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
  bool per_frame() const { return frame_labels.defined(); }
};

// Builds a set from per-video embeddings [T_i, D] (padding with zeros) and their labels.
EmbeddingSet MakeEmbeddingSet(const std::vector<torch::Tensor>& embeddings,
                              const std::vector<int64_t>& labels);
// A per-frame set: per-video embeddings [T_i, D] and each frame's label (T_i of them, -1 for
// none); the video labels are -1.
EmbeddingSet MakeFrameEmbeddingSet(const std::vector<torch::Tensor>& embeddings,
                                   const std::vector<std::vector<int64_t>>& frame_labels);

struct HeadTrainingOptions {
  int epochs = 80;
  int batch_size = 16;  // seed 004's GRU batch size (its transformer used 24)
  double learning_rate = 3e-3;
  // Cross-entropy weighted per class by w_y = n / (m_y * C) (seed 000), so that a rare class
  // counts as much as a frequent one; false gives every clip the same weight.
  bool class_weighted_loss = true;
  // Gradients are rescaled so that their global L2 norm is at most this (seed 004's remedy for
  // exploding gradients); 0 turns clipping off.
  double gradient_clip_norm = 1.0;
  // With a validation set: stop after this many epochs without a better validation macro recall
  // (0 never stops early). The weights of the best epoch are kept either way (seed 000).
  int early_stopping_patience = 15;
  // Seeds the shuffling, dropout and the head's initial weights.
  uint64_t seed = 7;
  // Per-frame sets only. The loss is MS-TCN's (Farha and Gall 2019): cross-entropy per frame
  // plus smoothing_weight times the mean over neighbouring frames and classes of
  // min((log p_t - log p_{t-1})^2, smoothing_clamp^2), p_{t-1} held fixed, which punishes labels
  // that flicker between frames and, clamped, still lets a true boundary through. Its 0.15 and 4.
  double smoothing_weight = 0.15;
  double smoothing_clamp = 4;
  // Per-frame sets only: each epoch cuts every video into windows of at most this many frames
  // at a random offset and batches the windows (0: whole videos), so that a step's cost does not
  // grow with the videos and long videos give many steps.
  int64_t window_frames = 0;
};

// What one epoch measured. Validation fields are 0 without a validation set.
// Per-frame sets count frames instead of videos in every field.
struct EpochStats {
  int epoch = 0;  // 1-based
  double train_loss = 0;
  double train_accuracy = 0;
  double validation_loss = 0;
  double validation_accuracy = 0;
  double validation_macro_recall = 0;
  double seconds = 0;
};

struct TrainingReport {
  std::vector<EpochStats> curves;
  // The epoch whose weights the head holds: the best validation macro recall, or the last.
  int best_epoch = 0;
  bool stopped_early = false;
  double final_loss = 0;
  double train_accuracy = 0;
};

// Fits `head` (Adam) to `train`, after setting its embedding standardisation from `train`'s
// valid frames. With a non-empty `validation`, evaluates it after every epoch and keeps the
// weights of the epoch with the best macro recall. `on_epoch` (may be empty) sees each epoch's
// stats as they come. Leaves the head in eval mode.
absl::StatusOr<TrainingReport> TrainHead(TemporalHead& head, const EmbeddingSet& train,
                                         const EmbeddingSet& validation,
                                         const HeadTrainingOptions& options,
                                         const std::function<void(const EpochStats&)>& on_epoch);

// The most probable class of each video of `set` ([N] int64). Puts the head in eval mode.
torch::Tensor Predict(TemporalHead& head, const EmbeddingSet& set, int64_t batch_size = 64);

// Each video's per-frame class probabilities [T_i, num_classes] (TemporalHead::forward_frames
// over the whole video, one video at a time). Puts the head in eval mode.
std::vector<torch::Tensor> FrameProbabilities(TemporalHead& head, const EmbeddingSet& set);

// Fraction of `set` whose most probable class is its label; of a per-frame set, of its labelled
// frames. Puts the head in eval mode.
double Accuracy(TemporalHead& head, const EmbeddingSet& set);

// Mean over the classes present in `labels` of the share of each class predicted correctly.
double MacroRecall(const torch::Tensor& predicted, const torch::Tensor& labels);

}  // namespace vidclf::model

#endif  // VIDCLF_MODEL_TRAIN_HEAD_TRAINER_H_
