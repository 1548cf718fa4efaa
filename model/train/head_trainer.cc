#include "model/train/head_trainer.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace vidclf::model {
namespace {

// Mean and standard deviation of each embedding feature over the valid frames of `set`.
std::pair<torch::Tensor, torch::Tensor> ValidFrameMoments(const EmbeddingSet& set) {
  const int64_t max_length = set.embeddings.size(1);
  const torch::Tensor valid =
      torch::arange(max_length).unsqueeze(0) < set.lengths.unsqueeze(1);  // [N, T]
  const torch::Tensor frames = set.embeddings.index({valid});             // [frames, D]
  return {frames.mean(0), frames.std(0).clamp_min(1e-6)};
}

}  // namespace

absl::StatusOr<TrainingReport> TrainHead(TemporalHead& head, const EmbeddingSet& train,
                                         const HeadTrainingOptions& options) {
  const int64_t n = train.embeddings.size(0);
  if (n == 0) return absl::InvalidArgumentError("no training videos");
  try {
    {
      torch::NoGradGuard no_grad;
      auto [mean, std] = ValidFrameMoments(train);
      head.embedding_mean.copy_(mean);
      head.embedding_std.copy_(std);
    }
    torch::manual_seed(options.seed);
    head.train();
    torch::optim::Adam optimizer(head.parameters(),
                                 torch::optim::AdamOptions(options.learning_rate));
    TrainingReport report;
    for (int epoch = 0; epoch < options.epochs; ++epoch) {
      const torch::Tensor order = torch::randperm(n);
      double loss_sum = 0;
      for (int64_t begin = 0; begin < n; begin += options.batch_size) {
        const torch::Tensor batch = order.slice(0, begin, begin + options.batch_size);
        optimizer.zero_grad();
        const torch::Tensor logits = head.forward(train.embeddings.index_select(0, batch),
                                                  train.lengths.index_select(0, batch));
        const torch::Tensor loss =
            torch::nn::functional::cross_entropy(logits, train.labels.index_select(0, batch));
        loss.backward();
        optimizer.step();
        loss_sum += loss.item<double>() * batch.size(0);
      }
      report.final_loss = loss_sum / n;
      if (options.on_epoch) options.on_epoch(epoch, report.final_loss);
    }
    head.eval();
    report.train_accuracy = Accuracy(head, train);
    return report;
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("head training failed: ", e.what_without_backtrace()));
  }
}

double Accuracy(TemporalHead& head, const EmbeddingSet& set) {
  if (set.embeddings.size(0) == 0) return 0;
  torch::NoGradGuard no_grad;
  head.eval();
  const torch::Tensor predicted = head.forward(set.embeddings, set.lengths).argmax(1);
  return predicted.eq(set.labels).to(torch::kDouble).mean().item<double>();
}

}  // namespace vidclf::model
