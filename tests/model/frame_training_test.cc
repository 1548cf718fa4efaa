// Training per frame (segmentation): videos of consecutive segments, each frame labelled, some
// frames unlabelled. What a class is shows only in how its frames change (the direction a
// feature drifts in), as in the synthetic timelines, so a head must look across frames; a
// segment's offset is random, so no single frame tells.
#include <gtest/gtest.h>

#include <vector>

#include "model/heads/gru_head.h"
#include "model/train/head_trainer.h"

namespace vidclf::model::frame_training_test {
namespace {

constexpr int64_t kInputSize = 6;
constexpr int64_t kClasses = 3;

// `videos` videos of `frames` frames: segments of 6 to 14 frames, class c drifting feature c
// upwards from a random offset, with noise; every 50th frame is unlabelled (-1).
EmbeddingSet Timelines(int videos, int64_t frames, uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<torch::Tensor> embeddings;
  std::vector<std::vector<int64_t>> labels;
  for (int v = 0; v < videos; ++v) {
    torch::Tensor video = torch::randn({frames, kInputSize}) * 0.05;
    std::vector<int64_t>& frame_labels = labels.emplace_back();
    int64_t previous = -1;
    for (int64_t start = 0; start < frames;) {
      const int64_t length = std::min(torch::randint(6, 15, {1}).item<int64_t>(), frames - start);
      int64_t label = torch::randint(kClasses, {1}).item<int64_t>();
      if (label == previous) label = (label + 1) % kClasses;
      previous = label;
      const double offset = torch::randn({1}).item<double>();
      for (int64_t k = 0; k < length; ++k) {
        video[start + k].add_(torch::randn({kInputSize}) * 0.5 + offset);
        video[start + k][label] += 0.3 * static_cast<double>(k);
        frame_labels.push_back((start + k) % 50 == 49 ? -1 : label);
      }
      start += length;
    }
    embeddings.push_back(video);
  }
  return MakeFrameEmbeddingSet(embeddings, labels);
}

double FrameAccuracy(TemporalHead& head, const EmbeddingSet& set) {
  int64_t right = 0;
  int64_t labelled = 0;
  const std::vector<torch::Tensor> probabilities = FrameProbabilities(head, set);
  for (size_t v = 0; v < probabilities.size(); ++v) {
    const torch::Tensor labels = set.frame_labels[static_cast<int64_t>(v)];
    right += probabilities[v].argmax(1).eq(labels).sum().item<int64_t>();
    labelled += (labels >= 0).sum().item<int64_t>();
  }
  return static_cast<double>(right) / static_cast<double>(labelled);
}

// Windows shorter than the videos, every epoch run.
HeadTrainingOptions Options(int epochs) {
  HeadTrainingOptions options;
  options.epochs = epochs;
  options.batch_size = 8;
  options.learning_rate = 3e-3;
  options.window_frames = 48;
  options.early_stopping_patience = 0;
  return options;
}

TEST(FrameTraining, SetsHoldEachFramesLabelAndPadWithNone) {
  const EmbeddingSet set = MakeFrameEmbeddingSet(
      {torch::zeros({3, kInputSize}), torch::zeros({1, kInputSize})}, {{0, -1, 2}, {1}});
  ASSERT_TRUE(set.per_frame());
  EXPECT_EQ(set.frame_labels.sizes(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(set.frame_labels[1][1].item<int64_t>(), -1);
  EXPECT_EQ(set.labels[0].item<int64_t>(), -1);
  EXPECT_FALSE(MakeEmbeddingSet({torch::zeros({3, kInputSize})}, {0}).per_frame());
}

// A causal GRU trained per frame, in windows shorter than the videos, labels held-out videos'
// frames far better than chance (1/3) and than the same head untrained; Accuracy and the
// validation curve count frames, the unlabelled ones left out.
TEST(FrameTraining, AGruLearnsToLabelEveryFrame) {
  const EmbeddingSet train = Timelines(24, 120, 1);
  const EmbeddingSet validation = Timelines(8, 200, 2);
  torch::manual_seed(3);
  GruHead head(GruHeadOptions(kClasses).input_size(kInputSize).hidden_size(16));
  const double untrained = Accuracy(*head, validation);
  absl::StatusOr<TrainingReport> report =
      TrainHead(*head, train, validation, Options(/*epochs=*/40), {});
  ASSERT_TRUE(report.ok()) << report.status();
  const double accuracy = Accuracy(*head, validation);
  EXPECT_GT(accuracy, 0.8) << "untrained " << untrained;
  EXPECT_LT(untrained, 0.6);
  EXPECT_NEAR(FrameAccuracy(*head, validation), accuracy, 1e-9);
  EXPECT_NEAR(report->curves[report->best_epoch - 1].validation_accuracy, accuracy, 1e-6);
}

// The smoothing loss punishes labels that flicker between neighbouring frames: the same head
// trained with it changes its answer between frames less often than trained without.
TEST(FrameTraining, SmoothingMakesFewerChangesOfLabel) {
  const EmbeddingSet train = Timelines(16, 120, 4);
  const EmbeddingSet validation = Timelines(6, 200, 5);
  const auto changes = [&](double smoothing_weight) {
    torch::manual_seed(3);
    GruHead head(GruHeadOptions(kClasses).input_size(kInputSize).hidden_size(16));
    HeadTrainingOptions options = Options(/*epochs=*/25);
    options.smoothing_weight = smoothing_weight;
    EXPECT_TRUE(TrainHead(*head, train, validation, options, {}).ok());
    int64_t count = 0;
    for (const torch::Tensor& video : FrameProbabilities(*head, validation)) {
      const torch::Tensor labels = video.argmax(1);
      count += labels.slice(0, 1).ne(labels.slice(0, 0, -1)).sum().item<int64_t>();
    }
    return count;
  };
  const int64_t without = changes(0);
  const int64_t with = changes(2);
  EXPECT_LT(with, without);
}

}  // namespace
}  // namespace vidclf::model::frame_training_test
