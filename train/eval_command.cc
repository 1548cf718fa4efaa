// vidclf-train eval: a run's classification report on a split of the cached embeddings.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model/torch_threads.h"
#include "model/train/head_trainer.h"
#include "model/video_model.h"
#include "train/classification_report.h"
#include "train/commands.h"
#include "train/embedding_cache.h"
#include "train/segment_report.h"
#include "train/timeline_eval.h"
#include "train/work_dir.h"

namespace vidclf::train {

namespace fs = std::filesystem;

void AddEvalFlags(CLI::App* app, EvalFlags* flags, bool with_work) {
  if (with_work) {
    app->add_option("--work", flags->work, "Work directory that fit wrote the run into.");
    app->add_option("--run", flags->run, "Run to evaluate.");
    app->add_option("--split", flags->split, "Clips to evaluate on.")
        ->capture_default_str()
        ->check(CLI::IsMember({"test", "validation", "train"}));
    app->add_option("--attention", flags->attention,
                    "Evaluate with this attention substitution (the bundle must allow it).");
    app->add_flag("--stream", flags->stream,
                  "Classify each clip as a live stream would: frame by frame, as the server "
                  "steps the head, the prediction after its last frame.");
    app->add_option("--stream-step-weights", flags->stream_step_weights,
                    "With --stream: int8 steps through int8 copies of the head's weights, as the "
                    "server's --stream-step-weights int8 does, and compares the probabilities "
                    "with float32 steps'.")
        ->capture_default_str()
        ->check(CLI::IsMember({"float32", "int8"}));
    app->add_option("--backbone-precision", flags->backbone_precision,
                    "bf16 or int8: embed the split's clips again with the backbone in that "
                    "precision, as vidclf-server --precision runs it on this CPU (int8 by the "
                    "work directory's calibration), and report how the predictions and "
                    "embeddings differ from fp32's (the cached embeddings).")
        ->capture_default_str()
        ->check(CLI::IsMember({"fp32", "bf16", "int8"}));
    app->add_flag("--segments", flags->segments,
                  "Instead of a run's report: compare the segments in --predicted with those in "
                  "--truth (frame-wise accuracy, edit score, F1@{0.10,0.25,0.50}, mAP at tIoU "
                  "{0.3,0.5,0.7}).");
    app->add_option("--truth", flags->truth,
                    "With --segments: the true segments (as vidclf-train synth --timeline "
                    "writes them).")
        ->check(CLI::ExistingFile);
    app->add_option("--predicted", flags->predicted,
                    "With --segments: the predicted segments, in the same format (a segment "
                    "object per vidclf segments --json line).")
        ->check(CLI::ExistingFile);
    app->add_option("--frame-step-seconds", flags->frame_step_seconds,
                    "With --segments: frame-wise accuracy looks at an instant this often.")
        ->capture_default_str()
        ->check(CLI::Range(0.001, 60.0));
    app->add_flag("--json", flags->json, "With --segments: print the metrics as one JSON object.");
  }
}

namespace {

// Each clip's probabilities [N, C] after its last frame, stepped into the head frame by frame as
// a live stream's are.
absl::StatusOr<torch::Tensor> StreamedProbabilities(const model::VideoModel& model,
                                                    const model::EmbeddingSet& set,
                                                    const std::string& attention) {
  std::vector<torch::Tensor> clips;
  for (int64_t clip = 0; clip < set.size(); ++clip) {
    const torch::Tensor frames = set.embeddings[clip].unsqueeze(0);  // [1, T, D]
    model::HeadState state;
    torch::Tensor probabilities;
    for (int64_t t = 0; t < set.lengths[clip].item<int64_t>(); ++t) {
      auto step = model.StreamStep(frames.slice(1, t, t + 1), state, attention);
      if (!step.ok()) return step.status();
      std::tie(probabilities, state) = *std::move(step);
    }
    clips.push_back(probabilities);
  }
  return torch::cat(clips);
}

// How far int8 steps' probabilities [N, C] moved from those of float32 steps of the run's model
// over the same clips.
absl::StatusOr<nlohmann::json> AgainstFloat32Steps(const std::string& run_dir,
                                                   const model::EmbeddingSet& set,
                                                   const std::string& attention,
                                                   const torch::Tensor& int8) {
  absl::StatusOr<std::unique_ptr<model::VideoModel>> exact =
      model::VideoModel::Load(run_dir, model::InferenceOptions::Exact());
  if (!exact.ok()) return exact.status();
  absl::StatusOr<torch::Tensor> float32 = StreamedProbabilities(**exact, set, attention);
  if (!float32.ok()) return float32.status();
  const torch::Tensor moved = (int8 - *float32).abs().amax(1);  // per clip
  return nlohmann::json{{"same_top1", int8.argmax(1).eq(float32->argmax(1)).sum().item<int64_t>()},
                        {"clips", int8.size(0)},
                        {"max_probability_difference", moved.max().item<double>()},
                        {"median_probability_difference", moved.median().item<double>()}};
}

// Class indices [N] int64 as a vector.
std::vector<int64_t> ClassIndices(const torch::Tensor& classes) {
  const torch::Tensor contiguous = classes.contiguous();
  return std::vector<int64_t>(contiguous.data_ptr<int64_t>(),
                              contiguous.data_ptr<int64_t>() + contiguous.size(0));
}

// How predictions of the run's head move when the split's clips are embedded again by the cache's
// backbone in `precision` rather than read from the cache (fp32, whose predictions and report are
// given): top-1 agreement, accuracy and macro recall in each, and the embeddings' largest and
// median relative error, frame by frame.
absl::StatusOr<nlohmann::json> AgainstFloat32Backbone(
    const EmbeddingCache& cache, const Dataset& dataset, const LoadedSplit& split,
    model::TemporalHead& head, const torch::Tensor& float32_predicted,
    const ClassificationReport& float32, model::Precision precision) {
  absl::StatusOr<media::ClipOptions> clip_options = SamplingOfSettings(cache.settings());
  if (!clip_options.ok()) return clip_options.status();
  model::InferenceOptions options;  // the server's defaults on the CPU
  options.device = torch::Device(torch::kCPU);
  options.precision = precision;
  absl::StatusOr<std::unique_ptr<model::VideoModel>> backbone =
      model::VideoModel::Load(cache.backbone_dir(), options);
  if (!backbone.ok()) return backbone.status();
  // Clips side by side, each on one intra-op thread, as embed runs them.
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  model::ConfigureTorchThreads(1);
  absl::StatusOr<std::vector<torch::Tensor>> embedded =
      EmbedClips(**backbone, dataset, split.clips, *clip_options, cores);
  model::ConfigureTorchThreads(cores);
  if (!embedded.ok()) return embedded.status();

  std::vector<double> errors;  // each frame's relative error
  std::vector<int64_t> labels;
  for (int64_t clip = 0; clip < split.set.size(); ++clip) {
    const int64_t frames = split.set.lengths[clip].item<int64_t>();
    const torch::Tensor exact = split.set.embeddings[clip].narrow(0, 0, frames);
    const torch::Tensor& other = (*embedded)[clip];
    if (other.size(0) != frames) {
      return absl::FailedPreconditionError(
          absl::StrCat(split.clips[clip].path, " gave ", other.size(0),
                       " frames where the cache holds ", frames, "; embed the data set again"));
    }
    const torch::Tensor relative = (other - exact).norm(2, 1) / exact.norm(2, 1).clamp_min(1e-12);
    const auto values = relative.contiguous();
    errors.insert(errors.end(), values.data_ptr<float>(), values.data_ptr<float>() + frames);
    labels.push_back(split.set.labels[clip].item<int64_t>());
  }
  const torch::Tensor predicted =
      model::Predict(head, model::MakeEmbeddingSet(*embedded, labels)).contiguous();
  absl::StatusOr<ClassificationReport> lower = ReportFromPredictions(
      dataset.classes, ClassIndices(split.set.labels), ClassIndices(predicted));
  if (!lower.ok()) return lower.status();
  std::sort(errors.begin(), errors.end());
  return nlohmann::json{{"precision", model::PrecisionName(precision)},
                        {"clips", split.set.size()},
                        {"same_top1", predicted.eq(float32_predicted).sum().item<int64_t>()},
                        {"accuracy_fp32", float32.accuracy},
                        {"accuracy", lower->accuracy},
                        {"macro_recall_fp32", float32.macro_recall},
                        {"macro_recall", lower->macro_recall},
                        {"largest_embedding_error", errors.back()},
                        {"median_embedding_error", errors[errors.size() / 2]}};
}

// A segmentation run on timelines: its frames' accuracy and the segments the server's tracker
// (default thresholds) makes of them, against the truth; writes eval-SPLIT.json and the
// predicted segments, segments-SPLIT.json, which `eval --segments --predicted` reads.
int EvalTimelines(const EvalFlags& flags, const Dataset& dataset, const EmbeddingCache& cache,
                  const LoadedSplit& split, model::TemporalHead& head, const std::string& run_dir) {
  if (flags.stream || flags.backbone_precision != "fp32") {
    std::cerr << "vidclf-train eval: a segmentation run is scored per frame over whole "
                 "timelines; leave out --stream and --backbone-precision\n";
    return kExitUsage;
  }
  const double frames_per_second = cache.frames_per_second();
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<TimelineEvaluation> evaluation = EvaluateTimelines(
      head, dataset.classes, split, frames_per_second, pipeline::SegmentOptions());
  if (!evaluation.ok()) {
    std::cerr << "vidclf-train eval: " << evaluation.status().message() << "\n";
    return kExitFailed;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << absl::StrFormat("%s on %d %s timelines, per frame at %g frames/s%s\n\n", flags.run,
                               split.set.size(), flags.split, frames_per_second,
                               flags.attention.empty() ? "" : ", attention " + flags.attention)
            << FormatSegmentReport(evaluation->report);
  nlohmann::json json(evaluation->report);
  json["run"] = flags.run;
  json["split"] = flags.split;
  json["attention"] = flags.attention;
  json["frames_per_second"] = frames_per_second;
  json["classify_seconds"] = seconds;
  const std::string suffix =
      flags.split + (flags.attention.empty() ? "" : "-" + flags.attention) + ".json";
  const std::string segments_path = (fs::path(run_dir) / ("segments-" + suffix)).string();
  std::ofstream segments(segments_path);
  segments << SegmentFileText(evaluation->predicted);
  if (!segments.flush()) {
    std::cerr << "vidclf-train eval: cannot write " << segments_path << "\n";
    return kExitFailed;
  }
  if (auto status = WriteJsonFile(json, (fs::path(run_dir) / ("eval-" + suffix)).string());
      !status.ok()) {
    std::cerr << "vidclf-train eval: " << status.message() << "\n";
    return kExitFailed;
  }
  return 0;
}

}  // namespace

int RunEval(const EvalFlags& flags) {
  if (flags.segments) return RunEvalSegments(flags);
  if (flags.work.empty() || flags.run.empty()) {
    std::cerr << "vidclf-train eval: give --work and --run (or --segments with --truth and "
                 "--predicted)\n";
    return kExitUsage;
  }
  absl::StatusOr<Dataset> dataset = LoadWorkDataset(flags.work);
  if (!dataset.ok()) {
    std::cerr << "vidclf-train eval: " << dataset.status().message() << "\n";
    return kExitUsage;
  }
  const bool int8 = flags.stream_step_weights == "int8";
  if (int8 && !flags.stream) {
    std::cerr << "vidclf-train eval: --stream-step-weights int8 needs --stream\n";
    return kExitUsage;
  }
  const bool other_precision = flags.backbone_precision != "fp32";
  if (other_precision && flags.stream) {
    std::cerr << "vidclf-train eval: --backbone-precision compares whole clips; leave out "
                 "--stream\n";
    return kExitUsage;
  }
  model::ConfigureTorchThreads(static_cast<int>(std::thread::hardware_concurrency()));
  const std::string run_dir = RunDir(flags.work, flags.run);
  model::InferenceOptions inference = model::InferenceOptions::Exact();
  inference.step_weights = int8 ? model::StepWeights::kInt8 : model::StepWeights::kFloat32;
  absl::StatusOr<std::unique_ptr<model::VideoModel>> model =
      model::VideoModel::Load(run_dir, inference);
  if (!model.ok()) {
    std::cerr << "vidclf-train eval: " << model.status().message()
              << " (run `vidclf-train fit --run " << flags.run << "` first)\n";
    return kExitUsage;
  }
  const Split split = flags.split == "train"        ? Split::kTrain
                      : flags.split == "validation" ? Split::kValidation
                                                    : Split::kTest;
  absl::StatusOr<EmbeddingCache> cache = OpenWorkCache(flags.work);
  absl::StatusOr<LoadedSplit> loaded =
      cache.ok() ? LoadSplit(*cache, *dataset, split) : absl::StatusOr<LoadedSplit>(cache.status());
  if (!loaded.ok()) {
    std::cerr << "vidclf-train eval: " << loaded.status().message() << "\n";
    return kExitFailed;
  }
  if (loaded->set.size() == 0) {
    std::cerr << "vidclf-train eval: no embedded " << flags.split << " clips\n";
    return kExitUsage;
  }
  // The run's own head, or the substitution --attention names when the bundle allows it.
  absl::StatusOr<model::TemporalHead*> head = (*model)->HeadFor(flags.attention);
  if (!head.ok()) {
    std::cerr << "vidclf-train eval: " << head.status().message() << "\n";
    return kExitUsage;
  }
  if (dataset->HasTimelines())
    return EvalTimelines(flags, *dataset, *cache, *loaded, **head, run_dir);
  if (int8 && !(*model)->int8_step_weights()) {
    std::cerr << "vidclf-train eval: the run's head has no step of one frame in int8 (only a "
                 "transformer with causal-linear attention has)\n";
    return kExitUsage;
  }
  const auto start = std::chrono::steady_clock::now();
  torch::Tensor predicted;
  torch::Tensor probabilities;  // streamed only
  if (flags.stream) {
    absl::StatusOr<torch::Tensor> streamed =
        StreamedProbabilities(**model, loaded->set, flags.attention);
    if (!streamed.ok()) {
      std::cerr << "vidclf-train eval: " << streamed.status().message() << "\n";
      return kExitFailed;
    }
    probabilities = *streamed;
    predicted = probabilities.argmax(1).contiguous();
  } else {
    predicted = model::Predict(**head, loaded->set).contiguous();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  absl::StatusOr<nlohmann::json> against_float32 = nlohmann::json();
  if (int8) {
    against_float32 = AgainstFloat32Steps(run_dir, loaded->set, flags.attention, probabilities);
    if (!against_float32.ok()) {
      std::cerr << "vidclf-train eval: " << against_float32.status().message() << "\n";
      return kExitFailed;
    }
  }
  absl::StatusOr<ClassificationReport> report = ReportFromPredictions(
      dataset->classes, ClassIndices(loaded->set.labels), ClassIndices(predicted));
  if (!report.ok()) {
    std::cerr << "vidclf-train eval: " << report.status().message() << "\n";
    return kExitFailed;
  }
  absl::StatusOr<nlohmann::json> against_float32_backbone = nlohmann::json();
  if (other_precision) {
    against_float32_backbone =
        AgainstFloat32Backbone(*cache, *dataset, *loaded, **head, predicted, *report,
                               *model::ParsePrecision(flags.backbone_precision));
    if (!against_float32_backbone.ok()) {
      std::cerr << "vidclf-train eval: " << against_float32_backbone.status().message() << "\n";
      return kExitFailed;
    }
  }
  const std::string how = absl::StrCat(
      flags.attention.empty() ? "" : ", attention " + flags.attention,
      flags.stream
          ? absl::StrCat(", streamed frame by frame, ", flags.stream_step_weights, " step weights")
          : "");
  std::cout << absl::StrFormat("%s on %d %s clips%s\n\n", flags.run, report->total, flags.split,
                               how)
            << FormatReport(*report) << "\n"
            << FormatConfusion(*report) << "\n"
            << absl::StrFormat("MCC %.4f\n", report->mcc);
  if (int8) {
    std::cout << absl::StrFormat(
        "Against float32 steps: the same top class on %d of %d clips; probabilities moved by at "
        "most %.2g (median over clips of the largest move: %.2g)\n",
        (*against_float32)["same_top1"].get<int64_t>(), (*against_float32)["clips"].get<int64_t>(),
        (*against_float32)["max_probability_difference"].get<double>(),
        (*against_float32)["median_probability_difference"].get<double>());
  }
  if (other_precision) {
    const nlohmann::json& against = *against_float32_backbone;
    std::cout << absl::StrFormat(
        "The backbone in %s against fp32: the same top class on %d of %d clips; accuracy "
        "%.4f against %.4f, macro recall %.4f against %.4f; embeddings %.2g from fp32's at most "
        "(median %.2g), relative, frame by frame\n",
        against["precision"].get<std::string>(), against["same_top1"].get<int64_t>(),
        against["clips"].get<int64_t>(), against["accuracy"].get<double>(),
        against["accuracy_fp32"].get<double>(), against["macro_recall"].get<double>(),
        against["macro_recall_fp32"].get<double>(),
        against["largest_embedding_error"].get<double>(),
        against["median_embedding_error"].get<double>());
  }
  nlohmann::json json = ReportToJson(*report);
  json["run"] = flags.run;
  json["split"] = flags.split;
  json["attention"] = flags.attention;
  json["classify_seconds"] = seconds;
  json["stream"] = flags.stream;
  json["stream_step_weights"] = flags.stream_step_weights;
  if (int8) json["against_float32_steps"] = *against_float32;
  if (other_precision) json["against_float32_backbone"] = *against_float32_backbone;
  const std::string name = "eval-" + flags.split +
                           (flags.attention.empty() ? "" : "-" + flags.attention) +
                           (flags.stream ? "-stream-" + flags.stream_step_weights : "") +
                           (other_precision ? "-" + flags.backbone_precision : "") + ".json";
  if (auto status = WriteJsonFile(json, (fs::path(run_dir) / name).string()); !status.ok()) {
    std::cerr << "vidclf-train eval: " << status.message() << "\n";
    return kExitFailed;
  }
  return 0;
}

}  // namespace vidclf::train
