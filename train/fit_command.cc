// vidclf-train fit: trains one head on the cached embeddings and writes it as a run.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "model/attention/registry.h"
#include "model/torch_threads.h"
#include "model/video_model.h"
#include "train/attention_cost.h"
#include "train/commands.h"
#include "train/training_curves.h"
#include "train/work_dir.h"

namespace vidclf::train {
namespace {

namespace fs = std::filesystem;

// A field of /proc/self/status in MiB ("VmRSS", "VmHWM"); 0 where it cannot be read.
double ProcStatusMib(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) / 1024;
  }
  return 0;
}

// Starts the peak-RSS measurement afresh (Linux: writing 5 to clear_refs resets VmHWM).
void ResetPeakRss() { std::ofstream("/proc/self/clear_refs") << "5"; }

absl::StatusOr<model::ModelConfig> RunConfig(const FitFlags& flags,
                                             const model::ModelConfig& backbone_config,
                                             int64_t longest_clip,
                                             std::optional<double> segmentation_rate) {
  model::ModelConfig config = backbone_config;
  if (segmentation_rate) config.segmentation = model::SegmentationConfig{*segmentation_rate};
  config.name = flags.run;
  config.version = "1";
  absl::StatusOr<model::HeadType> head = model::ParseHeadType(flags.head);
  if (!head.ok()) return head.status();
  config.head = *head;
  config.frame_differences =
      flags.head_input == "differences" || (flags.head_input == "auto" && segmentation_rate);
  config.gru.hidden_size = flags.gru_hidden_size;
  config.gru.num_layers = flags.gru_num_layers;
  config.gru.input_dropout = flags.gru_input_dropout;
  model::TransformerHeadConfig& t = config.transformer;
  t.d_model = flags.d_model;
  t.num_heads = flags.num_heads;
  t.num_layers = flags.num_layers;
  t.ffn_size = flags.ffn_size;
  t.dropout = flags.dropout;
  t.positional_encoding = flags.positional_encoding;
  absl::StatusOr<model::Pooling> pooling = model::ParsePooling(flags.pooling);
  if (!pooling.ok()) return pooling.status();
  t.pooling = *pooling;
  t.attention.type = flags.attention;
  // Sized for clips of tens of frames (AttentionParameter::clip_value).
  for (const model::attention::AttentionParameter& parameter :
       model::attention::AttentionParameters()) {
    if (parameter.clip_value > 0) t.attention.parameters[parameter.key] = parameter.clip_value;
  }
  for (const std::string& setting : flags.attention_parameters) {
    const std::pair<std::string, std::string> key_value = absl::StrSplit(setting, '=');
    const absl::StatusOr<model::attention::AttentionParameter> parameter =
        model::attention::FindAttentionParameter(key_value.first);
    if (!parameter.ok()) return parameter.status();
    int64_t value = 0;
    if (!absl::SimpleAtoi(key_value.second, &value)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--attention-parameter takes KEY=INTEGER, as in clusters=16; got \"", setting, "\""));
    }
    t.attention.parameters[key_value.first] = value;
  }
  // Positions the attention must accept: the longest clip here, or the 256 frames a request may
  // ask the server for (its default limit), plus a class token.
  t.attention.max_length = std::max<int64_t>(longest_clip, 256) + 1;
  t.attention_substitutions = flags.attention_substitutions;
  if (auto status = model::ValidateModelConfig(config); !status.ok()) return status;
  return config;
}

// Every tensor of the backbone from `from`, so that the run ships the weights that made the
// embeddings it was trained on.
void CopyBackbone(model::VideoModel& from, model::VideoModel& to) {
  torch::NoGradGuard no_grad;
  const auto source = from.backbone()->named_parameters();
  for (auto& item : to.backbone()->named_parameters()) item.value().copy_(source[item.key()]);
  const auto buffers = from.backbone()->named_buffers();
  for (auto& item : to.backbone()->named_buffers()) item.value().copy_(buffers[item.key()]);
}

// The run's backbone.pt becomes a hard link to the cache's: the same weights, no second copy.
void ShareBackboneFile(const std::string& work, const std::string& run_dir) {
  const fs::path cached = fs::path(work) / "backbone" / "backbone.pt";
  const fs::path own = fs::path(run_dir) / "backbone.pt";
  std::error_code error;
  const fs::path linked = own.string() + ".link";
  fs::create_hard_link(cached, linked, error);
  if (!error) fs::rename(linked, own, error);
}

}  // namespace

void AddFitFlags(CLI::App* app, FitFlags* flags, bool with_work) {
  if (with_work) {
    app->add_option("--work", flags->work, "Work directory that embed filled.")->required();
    app->add_option("--seed", flags->seed, "Seeds the head's weights, shuffling and dropout.")
        ->capture_default_str();
  }
  app->add_option("--run", flags->run, "Name of the run (and of the model it exports).")
      ->required();
  app->add_option("--head", flags->head, "Temporal head.")
      ->capture_default_str()
      ->check(CLI::IsMember({"gru", "transformer", "bag_of_frames"}));
  app->add_option("--attention", flags->attention,
                  absl::StrCat("Transformer attention: ",
                               absl::StrJoin(model::attention::AttentionNames(), ", "), "."))
      ->capture_default_str();
  app->add_option("--attention-substitutions", flags->attention_substitutions,
                  "Mechanisms the served model may run instead with the same weights "
                  "(e.g. clustered improved-clustered for a softmax model).");
  app->add_option("--pooling", flags->pooling,
                  "Transformer pooling: mean, cls or last (the last frame's output: a causal "
                  "head's label per frame on timelines).")
      ->capture_default_str()
      ->check(CLI::IsMember({"mean", "cls", "last"}));
  app->add_flag("--positional-encoding,!--no-positional-encoding", flags->positional_encoding,
                "Sinusoidal positions (off: the transformer sees a set of frames).")
      ->capture_default_str();
  app->add_option("--d-model", flags->d_model, "Transformer width (seed 004: 512).")
      ->capture_default_str();
  app->add_option("--num-heads", flags->num_heads, "Attention heads (seed 004: 8).")
      ->capture_default_str();
  app->add_option("--num-layers", flags->num_layers, "Encoder layers (seed 004: 6).")
      ->capture_default_str();
  app->add_option("--ffn-size", flags->ffn_size, "Feed-forward width (seed 004: 1024).")
      ->capture_default_str();
  app->add_option("--dropout", flags->dropout, "Transformer dropout.")->capture_default_str();
  std::vector<std::string> parameters;
  for (const model::attention::AttentionParameter& parameter :
       model::attention::AttentionParameters()) {
    parameters.push_back(absl::StrCat(
        parameter.key, " (", parameter.meaning, "; unset: ",
        parameter.clip_value > 0 ? parameter.clip_value : parameter.default_value, ")"));
  }
  app->add_option("--attention-parameter", flags->attention_parameters,
                  absl::StrCat("KEY=VALUE, repeatable: a parameter of the attention and its "
                               "substitutions. Keys: ",
                               absl::StrJoin(parameters, ", "), "."));
  app->add_option("--head-input", flags->head_input,
                  "frames, or differences: the head sees each frame's change from the one "
                  "before, what moves rather than what is there; auto: differences for "
                  "timelines, frames for clips.")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "frames", "differences"}));
  app->add_option("--gru-hidden-size", flags->gru_hidden_size, "GRU width (seed 004: 32).")
      ->capture_default_str();
  app->add_option("--gru-num-layers", flags->gru_num_layers, "GRU layers (seed 004: 2).")
      ->capture_default_str();
  app->add_option(
         "--gru-input-dropout", flags->gru_input_dropout,
         "Dropout on the GRU's input embeddings while training, in [0, 1) (seed 004: none).")
      ->capture_default_str();
  app->add_option("--epochs", flags->epochs, "Most epochs.")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app->add_option("--batch-size", flags->batch_size, "Clips per step.")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app->add_option("--learning-rate", flags->learning_rate,
                  "Adam learning rate (0: 3e-3 for gru and bag_of_frames, 1e-3 for transformer).")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app->add_option("--gradient-clip-norm", flags->gradient_clip_norm,
                  "Largest global gradient norm (0: no clipping).")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e9));
  app->add_option("--patience", flags->patience,
                  "Stop after this many epochs without a better validation macro recall (0: "
                  "never).")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  app->add_flag("--class-weighted-loss,!--no-class-weighted-loss", flags->class_weighted_loss,
                "Weight each class's clips by n / (m_y C) (seed 000); of timelines, its frames.")
      ->capture_default_str();
  app->add_option("--window-frames", flags->window_frames,
                  "Timelines: each epoch cuts them into windows of this many frames, at a random "
                  "offset, batched by --batch-size (0: whole timelines).")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  app->add_option("--smoothing-weight", flags->smoothing_weight,
                  "Timelines: the weight of MS-TCN's smoothing loss on neighbouring frames' "
                  "log-probabilities (0: cross-entropy alone).")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 100.0));
}

int RunFit(const FitFlags& flags) {
  absl::StatusOr<Dataset> dataset = LoadWorkDataset(flags.work);
  if (!dataset.ok()) {
    std::cerr << "vidclf-train fit: " << dataset.status().message() << "\n";
    return kExitUsage;
  }
  std::cout << model::ConfigureTorchThreads(static_cast<int>(std::thread::hardware_concurrency()))
            << std::endl;
  absl::StatusOr<EmbeddingCache> cache = OpenWorkCache(flags.work);
  if (!cache.ok()) {
    std::cerr << "vidclf-train fit: " << cache.status().message() << "\n";
    return kExitFailed;
  }
  absl::StatusOr<LoadedSplit> train = LoadSplit(*cache, *dataset, Split::kTrain);
  absl::StatusOr<LoadedSplit> validation = LoadSplit(*cache, *dataset, Split::kValidation);
  if (!train.ok() || !validation.ok()) {
    std::cerr << "vidclf-train fit: "
              << (train.ok() ? validation.status() : train.status()).message() << "\n";
    return kExitFailed;
  }
  if (train->set.size() == 0) {
    std::cerr << "vidclf-train fit: no embedded training clips in " << flags.work << "\n";
    return kExitUsage;
  }
  absl::StatusOr<std::unique_ptr<model::VideoModel>> backbone = model::VideoModel::Load(
      (fs::path(flags.work) / "backbone").string(), model::InferenceOptions::Exact());
  if (!backbone.ok()) {
    std::cerr << "vidclf-train fit: " << backbone.status().message() << "\n";
    return kExitFailed;
  }
  const int64_t longest =
      std::max(train->set.embeddings.size(1),
               validation->set.size() > 0 ? validation->set.embeddings.size(1) : int64_t{0});
  // Timelines train a segmentation model, at the rate they were sampled.
  std::optional<double> segmentation_rate;
  if (dataset->HasTimelines()) {
    segmentation_rate = cache->frames_per_second();
  }
  absl::StatusOr<model::ModelConfig> config =
      RunConfig(flags, (*backbone)->config(), longest, segmentation_rate);
  if (!config.ok()) {
    std::cerr << "vidclf-train fit: " << config.status().message() << "\n";
    return kExitUsage;
  }
  torch::manual_seed(flags.seed);
  absl::StatusOr<std::unique_ptr<model::VideoModel>> model = model::VideoModel::Create(*config);
  if (!model.ok()) {
    std::cerr << "vidclf-train fit: " << model.status().message() << "\n";
    return kExitUsage;
  }
  if (segmentation_rate && config->head == model::HeadType::kTransformer &&
      config->transformer.pooling == model::Pooling::kMean && (*model)->head().causal()) {
    std::cerr << "vidclf-train fit: a causal transformer trained per frame needs --pooling last: "
                 "with mean pooling each frame's answer is the mean over the whole video so "
                 "far, which cannot follow its segments\n";
    return kExitUsage;
  }
  CopyBackbone(**backbone, **model);
  backbone->reset();

  model::HeadTrainingOptions options;
  options.epochs = flags.epochs;
  options.batch_size = flags.batch_size;
  options.learning_rate = flags.learning_rate > 0                         ? flags.learning_rate
                          : config->head == model::HeadType::kTransformer ? 1e-3
                                                                          : 3e-3;
  options.class_weighted_loss = flags.class_weighted_loss;
  options.gradient_clip_norm = flags.gradient_clip_norm;
  options.early_stopping_patience = flags.patience;
  options.seed = flags.seed;
  options.window_frames = flags.window_frames;
  options.smoothing_weight = flags.smoothing_weight;
  std::cout << absl::StrFormat(
                   "fitting %s (%s) on %d %s, validating on %d", flags.run,
                   flags.head == "transformer" ? flags.attention : flags.head, train->set.size(),
                   segmentation_rate
                       ? absl::StrFormat("timelines per frame (%g frames/s)", *segmentation_rate)
                       : std::string("clips"),
                   validation->set.size())
            << std::endl;
  const double rss_before = ProcStatusMib("VmRSS");
  ResetPeakRss();
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<model::TrainingReport> report = model::TrainHead(
      (*model)->head(), train->set, validation->set, options, [&](const model::EpochStats& e) {
        std::cout << absl::StrFormat(
                         "epoch %3d/%d  loss %.4f  acc %.3f | validation loss %.4f  acc %.3f  "
                         "macro recall %.3f  (%.2f s)",
                         e.epoch, options.epochs, e.train_loss, e.train_accuracy, e.validation_loss,
                         e.validation_accuracy, e.validation_macro_recall, e.seconds)
                  << std::endl;
      });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double peak_training_mib = std::max(0.0, ProcStatusMib("VmHWM") - rss_before);
  if (!report.ok()) {
    std::cerr << "vidclf-train fit: " << report.status().message() << "\n";
    return kExitFailed;
  }
  const std::string run_dir = RunDir(flags.work, flags.run);
  if (auto status = (*model)->Save(run_dir); !status.ok()) {
    std::cerr << "vidclf-train fit: " << status.message() << "\n";
    return kExitFailed;
  }
  ShareBackboneFile(flags.work, run_dir);
  const double mean_frames = train->set.lengths.to(torch::kDouble).mean().item<double>();
  const nlohmann::json fit = {
      {"run", flags.run},
      {"head", flags.head},
      {"attention", flags.head == "transformer" ? flags.attention : ""},
      {"positional_encoding", flags.positional_encoding},
      {"seed", flags.seed},
      {"epochs_run", report->curves.size()},
      {"best_epoch", report->best_epoch},
      {"stopped_early", report->stopped_early},
      {"learning_rate", options.learning_rate},
      {"batch_size", options.batch_size},
      {"class_weighted_loss", options.class_weighted_loss},
      {"per_frame", segmentation_rate.has_value()},
      {"window_frames", segmentation_rate ? options.window_frames : 0},
      {"smoothing_weight", segmentation_rate ? options.smoothing_weight : 0.0},
      {"gradient_clip_norm", options.gradient_clip_norm},
      {"train_clips", train->set.size()},
      {"validation_clips", validation->set.size()},
      {"best_validation_macro_recall",
       report->curves[report->best_epoch - 1].validation_macro_recall},
      {"train_accuracy", report->train_accuracy},
      {"training_seconds", seconds},
      {"peak_training_mib", peak_training_mib},
      {"mean_frames_per_clip", mean_frames},
      {"attention_flops_per_clip",
       AttentionFlopsPerClip(*config, static_cast<int64_t>(std::lround(mean_frames)))},
  };
  absl::Status written = WriteJsonFile(fit, (fs::path(run_dir) / "fit.json").string());
  if (written.ok()) {
    written = WriteCurvesCsv(report->curves, (fs::path(run_dir) / "curves.csv").string());
  }
  if (written.ok()) {
    written = DrawCurvesPng(report->curves, report->best_epoch,
                            absl::StrFormat("%s: %s", flags.run,
                                            fit["attention"].get<std::string>().empty()
                                                ? flags.head
                                                : "transformer, " + flags.attention),
                            (fs::path(run_dir) / "curves.png").string());
  }
  if (!written.ok()) {
    std::cerr << "vidclf-train fit: " << written.message() << "\n";
    return kExitFailed;
  }
  std::cout << absl::StrFormat(
                   "kept epoch %d of %d (validation macro recall %.3f)%s; %.1f s, peak %.0f MiB "
                   "above the data; wrote %s",
                   report->best_epoch, report->curves.size(),
                   fit["best_validation_macro_recall"].get<double>(),
                   report->stopped_early ? ", stopped early" : "", seconds, peak_training_mib,
                   run_dir)
            << std::endl;
  return 0;
}

}  // namespace vidclf::train
