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
  if (set.per_frame())
    batch.frame_labels = set.frame_labels.index_select(0, rows).slice(1, 0, longest);
  return batch;
}

// A per-frame set cut, for one epoch, into consecutive windows of at most `window` frames of
// each video, the cuts shifted by a random offset each epoch (torch's generator, seeded by the
// trainer) so that no frame is always at a window's edge. Every frame is in one window: an
// epoch sees each video once, in as many steps as its length needs.
EmbeddingSet EpochWindows(const EmbeddingSet& set, int64_t window) {
  if (window <= 0 || set.embeddings.size(1) <= window) return set;
  std::vector<torch::Tensor> embeddings;
  std::vector<torch::Tensor> frame_labels;
  std::vector<int64_t> lengths;
  for (int64_t v = 0; v < set.size(); ++v) {
    const int64_t length = set.lengths[v].item<int64_t>();
    int64_t begin = 0;
    int64_t end = length > window ? torch::randint(1, window + 1, {1}).item<int64_t>() : length;
    while (begin < length) {
      embeddings.push_back(set.embeddings[v].slice(0, begin, end));
      frame_labels.push_back(set.frame_labels[v].slice(0, begin, end));
      lengths.push_back(end - begin);
      begin = end;
      end = std::min(length, end + window);
    }
  }
  EmbeddingSet windows;
  windows.embeddings = torch::nn::utils::rnn::pad_sequence(embeddings, /*batch_first=*/true);
  windows.frame_labels = torch::nn::utils::rnn::pad_sequence(frame_labels, /*batch_first=*/true,
                                                             /*padding_value=*/-1);
  windows.lengths = torch::tensor(lengths, torch::kLong);
  windows.labels = torch::full({static_cast<int64_t>(lengths.size())}, -1, torch::kLong);
  return windows;
}

// The labels of a per-frame set's labelled frames [M].
torch::Tensor LabelledFrames(const EmbeddingSet& set) {
  return set.frame_labels.masked_select(set.frame_labels >= 0);
}

// A batch's loss, and how many of its clips (or labelled frames) the logits got right of how many.
struct BatchLoss {
  torch::Tensor loss;
  int64_t correct = 0;
  int64_t count = 0;
};

BatchLoss ClipLoss(TemporalHead& head, const EmbeddingSet& batch,
                   const torch::nn::functional::CrossEntropyFuncOptions& loss_options) {
  const torch::Tensor logits = head.forward(batch.embeddings, batch.lengths);
  return {torch::nn::functional::cross_entropy(logits, batch.labels, loss_options),
          logits.argmax(1).eq(batch.labels).sum().item<int64_t>(), batch.size()};
}

// Cross-entropy over the labelled frames (class-weighted by `weight` unless undefined) plus the
// smoothing term over neighbouring frames within each video (HeadTrainingOptions).
BatchLoss FrameLoss(TemporalHead& head, const EmbeddingSet& batch, const torch::Tensor& weight,
                    const HeadTrainingOptions& options) {
  const torch::Tensor logits = head.forward_frames(batch.embeddings, batch.lengths);  // [B, T, C]
  const int64_t frames = logits.size(1);
  const torch::Tensor flat_logits = logits.reshape({-1, logits.size(2)});
  const torch::Tensor flat_labels = batch.frame_labels.reshape({-1});
  const torch::Tensor labelled = flat_labels >= 0;
  BatchLoss result;
  result.count = labelled.sum().item<int64_t>();
  result.correct =
      flat_logits.argmax(1).eq(flat_labels).logical_and(labelled).sum().item<int64_t>();
  auto loss_options = torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-1);
  if (weight.defined()) loss_options.weight(weight);
  // With no labelled frame the mean would be 0 / 0.
  result.loss = result.count > 0
                    ? torch::nn::functional::cross_entropy(flat_logits, flat_labels, loss_options)
                    : logits.sum() * 0;
  if (options.smoothing_weight > 0 && frames > 1) {
    const torch::Tensor log_p = torch::log_softmax(logits, /*dim=*/2);
    const torch::Tensor change =
        log_p.slice(1, 1) - log_p.slice(1, 0, frames - 1).detach();  // [B, T - 1, C]
    const torch::Tensor penalty =
        change.square().clamp_max(options.smoothing_clamp * options.smoothing_clamp).mean(2);
    // Frame t + 1 within its video: so is frame t.
    const torch::Tensor within =
        (torch::arange(1, frames).unsqueeze(0) < batch.lengths.unsqueeze(1)).to(penalty.dtype());
    result.loss = result.loss +
                  options.smoothing_weight * (penalty * within).sum() / within.sum().clamp_min(1);
  }
  return result;
}

// The validation fields of `stats`: per clip, or of a per-frame set over its labelled frames,
// video by video (a whole timeline at once, as served, in memory for one).
void Validate(TemporalHead& head, const EmbeddingSet& validation, EpochStats* stats) {
  torch::Tensor predicted;
  torch::Tensor labels;
  if (validation.per_frame()) {
    std::vector<torch::Tensor> frames_predicted;
    std::vector<torch::Tensor> frames_labels;
    double loss_sum = 0;
    const std::vector<torch::Tensor> probabilities = FrameProbabilities(head, validation);
    for (size_t v = 0; v < probabilities.size(); ++v) {
      const torch::Tensor frame_labels =
          validation.frame_labels[static_cast<int64_t>(v)].slice(0, 0, probabilities[v].size(0));
      const torch::Tensor labelled = frame_labels >= 0;
      loss_sum +=
          torch::nn::functional::nll_loss(
              probabilities[v].clamp_min(1e-12).log(), frame_labels,
              torch::nn::functional::NLLLossFuncOptions().ignore_index(-1).reduction(torch::kSum))
              .item<double>();
      frames_predicted.push_back(probabilities[v].argmax(1).masked_select(labelled));
      frames_labels.push_back(frame_labels.masked_select(labelled));
    }
    predicted = torch::cat(frames_predicted);
    labels = torch::cat(frames_labels);
    stats->validation_loss = loss_sum / static_cast<double>(std::max<int64_t>(labels.size(0), 1));
  } else {
    head.eval();
    torch::NoGradGuard no_grad;
    const torch::Tensor logits = head.forward(validation.embeddings, validation.lengths);
    stats->validation_loss =
        torch::nn::functional::cross_entropy(logits, validation.labels).item<double>();
    predicted = logits.argmax(1);
    labels = validation.labels;
  }
  stats->validation_accuracy = predicted.eq(labels).to(torch::kDouble).mean().item<double>();
  stats->validation_macro_recall = MacroRecall(predicted, labels);
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

EmbeddingSet MakeFrameEmbeddingSet(const std::vector<torch::Tensor>& embeddings,
                                   const std::vector<std::vector<int64_t>>& frame_labels) {
  EmbeddingSet set =
      MakeEmbeddingSet(embeddings, std::vector<int64_t>(embeddings.size(), int64_t{-1}));
  if (embeddings.empty()) return set;
  std::vector<torch::Tensor> labels;
  for (const std::vector<int64_t>& video : frame_labels) {
    labels.push_back(torch::tensor(video, torch::kLong));
  }
  set.frame_labels =
      torch::nn::utils::rnn::pad_sequence(labels, /*batch_first=*/true, /*padding_value=*/-1);
  return set;
}

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
    torch::Tensor class_weights;
    if (options.class_weighted_loss) {
      class_weights =
          ClassWeights(train.per_frame() ? LabelledFrames(train) : train.labels, num_classes);
      loss_options.weight(class_weights);
    }

    TrainingReport report;
    std::vector<torch::Tensor> best_state;
    double best_recall = -1;
    for (int epoch = 1; epoch <= options.epochs; ++epoch) {
      const auto start = std::chrono::steady_clock::now();
      head.train();
      const EmbeddingSet epoch_set =
          train.per_frame() ? EpochWindows(train, options.window_frames) : train;
      const int64_t rows_in_epoch = epoch_set.size();
      const torch::Tensor order = torch::randperm(rows_in_epoch);
      double loss_sum = 0;
      int64_t correct = 0;
      int64_t count = 0;
      for (int64_t begin = 0; begin < rows_in_epoch; begin += options.batch_size) {
        const EmbeddingSet rows =
            Rows(epoch_set, order.slice(0, begin, begin + options.batch_size));
        optimizer.zero_grad();
        const BatchLoss batch = train.per_frame() ? FrameLoss(head, rows, class_weights, options)
                                                  : ClipLoss(head, rows, loss_options);
        batch.loss.backward();
        if (options.gradient_clip_norm > 0) {
          torch::nn::utils::clip_grad_norm_(head.parameters(), options.gradient_clip_norm);
        }
        optimizer.step();
        loss_sum += batch.loss.item<double>() * static_cast<double>(batch.count);
        correct += batch.correct;
        count += batch.count;
      }
      EpochStats stats;
      stats.epoch = epoch;
      stats.train_loss = loss_sum / static_cast<double>(std::max<int64_t>(count, 1));
      stats.train_accuracy =
          static_cast<double>(correct) / static_cast<double>(std::max<int64_t>(count, 1));
      if (validation.size() > 0) Validate(head, validation, &stats);
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

std::vector<torch::Tensor> FrameProbabilities(TemporalHead& head, const EmbeddingSet& set) {
  torch::NoGradGuard no_grad;
  head.eval();
  std::vector<torch::Tensor> probabilities;
  for (int64_t v = 0; v < set.size(); ++v) {
    const torch::Tensor length = set.lengths.slice(0, v, v + 1);
    const torch::Tensor frames =
        set.embeddings.slice(0, v, v + 1).slice(1, 0, length.item<int64_t>());
    probabilities.push_back(torch::softmax(head.forward_frames(frames, length)[0], /*dim=*/1));
  }
  return probabilities;
}

double Accuracy(TemporalHead& head, const EmbeddingSet& set) {
  if (set.size() == 0) return 0;
  if (!set.per_frame()) {
    return Predict(head, set).eq(set.labels).to(torch::kDouble).mean().item<double>();
  }
  int64_t correct = 0;
  int64_t labelled = 0;
  const std::vector<torch::Tensor> probabilities = FrameProbabilities(head, set);
  for (size_t v = 0; v < probabilities.size(); ++v) {
    const torch::Tensor labels =
        set.frame_labels[static_cast<int64_t>(v)].slice(0, 0, probabilities[v].size(0));
    correct += probabilities[v].argmax(1).eq(labels).sum().item<int64_t>();
    labelled += (labels >= 0).sum().item<int64_t>();
  }
  return labelled == 0 ? 0 : static_cast<double>(correct) / static_cast<double>(labelled);
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
