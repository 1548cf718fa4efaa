#include "model/train/head_trainer.h"

#include <algorithm>
#include <chrono>
#include <utility>

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

// w_y = n / (m_y * C): every class's clips weigh n / C in total. Absent classes get 0.
torch::Tensor ClassWeights(const torch::Tensor& labels, int64_t num_classes) {
  const torch::Tensor counts =
      torch::bincount(labels, /*weights=*/{}, num_classes).to(torch::kFloat);
  const auto n = static_cast<double>(labels.size(0));
  return torch::where(counts > 0, n / (counts * static_cast<double>(num_classes)),
                      torch::zeros_like(counts));
}

// The slice of `set` at `rows` (int64 indices), trimmed to its longest video so that a batch of
// short clips does not run over the padding of the longest clip in the set.
EmbeddingSet Rows(const EmbeddingSet& set, const torch::Tensor& rows) {
  EmbeddingSet batch;
  batch.lengths = set.lengths.index_select(0, rows);
  const int64_t longest = batch.lengths.max().item<int64_t>();
  batch.embeddings = set.embeddings.index_select(0, rows).slice(1, 0, longest);
  batch.labels = set.labels.index_select(0, rows);
  return batch;
}

std::vector<torch::Tensor> Snapshot(TemporalHead& head) {
  std::vector<torch::Tensor> state;
  for (const torch::Tensor& p : head.parameters()) state.push_back(p.detach().clone());
  for (const torch::Tensor& b : head.buffers()) state.push_back(b.detach().clone());
  return state;
}

void Restore(TemporalHead& head, const std::vector<torch::Tensor>& state) {
  torch::NoGradGuard no_grad;
  size_t i = 0;
  for (torch::Tensor& p : head.parameters()) p.copy_(state[i++]);
  for (torch::Tensor& b : head.buffers()) b.copy_(state[i++]);
}

}  // namespace

EmbeddingSet MakeEmbeddingSet(const std::vector<torch::Tensor>& embeddings,
                              const std::vector<int64_t>& labels) {
  EmbeddingSet set;
  if (embeddings.empty()) return set;
  std::vector<int64_t> lengths;
  lengths.reserve(embeddings.size());
  for (const torch::Tensor& e : embeddings) lengths.push_back(e.size(0));
  set.embeddings = torch::nn::utils::rnn::pad_sequence(embeddings, /*batch_first=*/true);
  set.lengths = torch::tensor(lengths, torch::kLong);
  set.labels = torch::tensor(labels, torch::kLong);
  return set;
}

absl::StatusOr<TrainingReport> TrainHead(TemporalHead& head, const EmbeddingSet& train,
                                         const EmbeddingSet& validation,
                                         const HeadTrainingOptions& options,
                                         const std::function<void(const EpochStats&)>& on_epoch) {
  const int64_t n = train.size();
  if (n == 0) return absl::InvalidArgumentError("no training videos");
  if (options.epochs < 1 || options.batch_size < 1 || !(options.learning_rate > 0)) {
    return absl::InvalidArgumentError("epochs, batch size and learning rate must be positive");
  }
  try {
    {
      torch::NoGradGuard no_grad;
      auto [mean, std] = ValidFrameMoments(train);
      head.embedding_mean.copy_(mean);
      head.embedding_std.copy_(std);
    }
    torch::manual_seed(options.seed);
    torch::optim::Adam optimizer(head.parameters(),
                                 torch::optim::AdamOptions(options.learning_rate));
    // The number of classes is the width of the head's output.
    int64_t num_classes = 0;
    {
      torch::NoGradGuard no_grad;
      head.eval();
      num_classes = head.forward(Rows(train, torch::zeros({1}, torch::kLong)).embeddings,
                                 train.lengths.slice(0, 0, 1))
                        .size(1);
    }
    auto loss_options = torch::nn::functional::CrossEntropyFuncOptions();
    if (options.class_weighted_loss) loss_options.weight(ClassWeights(train.labels, num_classes));

    TrainingReport report;
    std::vector<torch::Tensor> best_state;
    double best_recall = -1;
    for (int epoch = 1; epoch <= options.epochs; ++epoch) {
      const auto start = std::chrono::steady_clock::now();
      head.train();
      const torch::Tensor order = torch::randperm(n);
      double loss_sum = 0;
      int64_t correct = 0;
      for (int64_t begin = 0; begin < n; begin += options.batch_size) {
        const EmbeddingSet batch = Rows(train, order.slice(0, begin, begin + options.batch_size));
        optimizer.zero_grad();
        const torch::Tensor logits = head.forward(batch.embeddings, batch.lengths);
        const torch::Tensor loss =
            torch::nn::functional::cross_entropy(logits, batch.labels, loss_options);
        loss.backward();
        if (options.gradient_clip_norm > 0) {
          torch::nn::utils::clip_grad_norm_(head.parameters(), options.gradient_clip_norm);
        }
        optimizer.step();
        loss_sum += loss.item<double>() * static_cast<double>(batch.size());
        correct += logits.argmax(1).eq(batch.labels).sum().item<int64_t>();
      }
      EpochStats stats;
      stats.epoch = epoch;
      stats.train_loss = loss_sum / static_cast<double>(n);
      stats.train_accuracy = static_cast<double>(correct) / static_cast<double>(n);
      if (validation.size() > 0) {
        head.eval();
        torch::NoGradGuard no_grad;
        const torch::Tensor logits = head.forward(validation.embeddings, validation.lengths);
        stats.validation_loss =
            torch::nn::functional::cross_entropy(logits, validation.labels).item<double>();
        const torch::Tensor predicted = logits.argmax(1);
        stats.validation_accuracy =
            predicted.eq(validation.labels).to(torch::kDouble).mean().item<double>();
        stats.validation_macro_recall = MacroRecall(predicted, validation.labels);
      }
      stats.seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      report.curves.push_back(stats);
      if (on_epoch) on_epoch(stats);

      if (validation.size() == 0) continue;
      if (stats.validation_macro_recall > best_recall) {
        best_recall = stats.validation_macro_recall;
        report.best_epoch = epoch;
        best_state = Snapshot(head);
      } else if (options.early_stopping_patience > 0 &&
                 epoch - report.best_epoch >= options.early_stopping_patience) {
        report.stopped_early = true;
        break;
      }
    }
    if (best_state.empty()) {
      report.best_epoch = static_cast<int>(report.curves.size());
    } else {
      Restore(head, best_state);
    }
    head.eval();
    report.final_loss = report.curves.back().train_loss;
    report.train_accuracy = Accuracy(head, train);
    return report;
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("head training failed: ", e.what_without_backtrace()));
  }
}

torch::Tensor Predict(TemporalHead& head, const EmbeddingSet& set, int64_t batch_size) {
  torch::NoGradGuard no_grad;
  head.eval();
  std::vector<torch::Tensor> predicted;
  for (int64_t begin = 0; begin < set.size(); begin += batch_size) {
    const EmbeddingSet batch =
        Rows(set, torch::arange(begin, std::min(begin + batch_size, set.size())));
    predicted.push_back(head.forward(batch.embeddings, batch.lengths).argmax(1));
  }
  return predicted.empty() ? torch::zeros({0}, torch::kLong) : torch::cat(predicted);
}

double Accuracy(TemporalHead& head, const EmbeddingSet& set) {
  if (set.size() == 0) return 0;
  return Predict(head, set).eq(set.labels).to(torch::kDouble).mean().item<double>();
}

double MacroRecall(const torch::Tensor& predicted, const torch::Tensor& labels) {
  const torch::Tensor classes = std::get<0>(torch::_unique(labels));
  double sum = 0;
  for (int64_t i = 0; i < classes.size(0); ++i) {
    const torch::Tensor of_class = labels.eq(classes[i]);
    sum += predicted.index({of_class}).eq(classes[i]).to(torch::kDouble).mean().item<double>();
  }
  return classes.size(0) == 0 ? 0 : sum / static_cast<double>(classes.size(0));
}

}  // namespace vidclf::model
