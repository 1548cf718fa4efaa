// vidclf-train embed: splits a data set and embeds every clip into the work directory's cache.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "media/frame_sampler.h"
#include "model/resnet18_archive.h"
#include "model/torch_threads.h"
#include "model/video_model.h"
#include "train/commands.h"
#include "train/embedding_cache.h"
#include "train/timeline_dataset.h"
#include "train/work_dir.h"

namespace vidclf::train {
namespace {

namespace fs = std::filesystem;

// What the cached embeddings depend on: if any of it changes, they must be made again.
nlohmann::json EmbedSettings(const EmbedFlags& flags, const model::InputConfig& input) {
  return {{"input",
           {{"resize_shorter_side", input.resize_shorter_side},
            {"crop_size", input.crop_size},
            {"mean", input.mean},
            {"std", input.std}}},
          {"sampling",
           {{"strategy", flags.sampling},
            {"num_frames", flags.num_frames},
            {"frames_per_second", flags.sampling == "fps" ? flags.frames_per_second : 0.0}}},
          {"backbone", flags.backbone_archive.empty()
                           ? nlohmann::json{{"weights", "random"}, {"seed", flags.seed}}
                           : nlohmann::json{{"weights", "archive"},
                                            {"file", fs::absolute(flags.backbone_archive)}}}};
}

// The backbone of the cache: loaded when an earlier run made it, else made (seeded, or from the
// archive) and saved beside the embeddings, so that every run of fit ships exactly these weights.
absl::StatusOr<std::unique_ptr<model::VideoModel>> CacheBackbone(const EmbedFlags& flags,
                                                                 const model::ModelConfig& config,
                                                                 const EmbeddingCache& cache) {
  if (fs::exists(fs::path(cache.backbone_dir()) / "model.json")) {
    return model::VideoModel::Load(cache.backbone_dir(), model::InferenceOptions::Exact());
  }
  torch::manual_seed(flags.seed);
  absl::StatusOr<std::unique_ptr<model::VideoModel>> model = model::VideoModel::Create(config);
  if (!model.ok()) return model.status();
  if (!flags.backbone_archive.empty()) {
    if (auto status = model::LoadResNet18Archive(flags.backbone_archive, (*model)->backbone());
        !status.ok()) {
      return status;
    }
  }
  if (auto status = (*model)->Save(cache.backbone_dir()); !status.ok()) return status;
  return model;
}

// The backbone that embeds: the cache's own (eager), or with --backbone-kernels fused or
// winograd the same weights run as vidclf-server runs them (channels-last, batch norm folded into
// the convolutions; Winograd 3x3 convolutions where the CPU has them): embeddings within a
// relative 1e-4 of the eager module's, in about half the time (docs/backbone-benchmark.md).
absl::StatusOr<std::unique_ptr<model::VideoModel>> EmbeddingBackbone(
    const EmbedFlags& flags, const model::ModelConfig& config, const EmbeddingCache& cache) {
  absl::StatusOr<std::unique_ptr<model::VideoModel>> model = CacheBackbone(flags, config, cache);
  if (!model.ok() || flags.backbone_kernels == "eager") return model;
  absl::StatusOr<model::BackboneKernels> kernels =
      model::ParseBackboneKernels(flags.backbone_kernels);
  if (!kernels.ok()) return kernels.status();
  model::InferenceOptions options = model::InferenceOptions::Exact();
  options.channels_last = true;
  options.backbone_kernels = *kernels;
  return model::VideoModel::Load(cache.backbone_dir(), options);
}

// Where `vidclf-train synth --output OUT` put the split lists of OUT/videos: OUT/splits, when
// both lists are there.
std::optional<fs::path> SynthSplitsBeside(const std::string& data) {
  fs::path videos = fs::path(data).lexically_normal();
  if (videos.filename().empty()) videos = videos.parent_path();  // "OUT/videos/"
  const fs::path splits = videos.parent_path() / "splits";
  if (fs::exists(splits / "trainlist01.txt") && fs::exists(splits / "testlist01.txt")) {
    return splits;
  }
  return std::nullopt;
}

// Why `dataset` cannot go into a work directory whose earlier embed split it otherwise (`earlier`,
// its dataset.json): fit, eval and export would mix runs of two splits. OK when it is the same.
absl::Status SameSplit(const nlohmann::json& earlier, const Dataset& dataset) {
  absl::StatusOr<Dataset> before = DatasetFromJson(earlier);
  if (!before.ok()) return before.status();
  if (before->classes != dataset.classes) {
    std::vector<std::string> earlier_set = before->classes, now_set = dataset.classes;
    std::sort(earlier_set.begin(), earlier_set.end());
    std::sort(now_set.begin(), now_set.end());
    return absl::FailedPreconditionError(earlier_set == now_set
                                             ? "its classes come in another order (classInd.txt)"
                                             : "its classes are not this data set's");
  }
  // Clips on another side, or in one split only.
  std::map<std::string, Split> sides;
  for (const Clip& clip : before->clips) sides[clip.path] = clip.split;
  int64_t differ = 0;
  for (const Clip& clip : dataset.clips) {
    const auto side = sides.find(clip.path);
    if (side == sides.end() || side->second != clip.split) ++differ;
    if (side != sides.end()) sides.erase(side);
  }
  differ += static_cast<int64_t>(sides.size());
  if (differ == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("its split (", before->split_source,
                                                    ") and this one (", dataset.split_source,
                                                    ") differ in ", differ, " clips"));
}

}  // namespace

void AddDataFlags(CLI::App* app, DataFlags* flags) {
  CLI::Option* data = app->add_option("--data", flags->data,
                                      "Data set root in the UCF101 layout: DATA/<class>/<video>.");
  app->add_option("--truth", flags->truth,
                  "Instead of --data: timelines to train per frame (segmentation), as the truth "
                  "file of `vidclf-train synth --timeline` names them (truth.json, the videos "
                  "beside it). Sampled with fps sampling, every sampled frame kept.")
      ->excludes(data);
  app->add_option("--validation-truth", flags->validation_truth,
                  "With --truth: timelines that choose the epoch.");
  app->add_option("--test-truth", flags->test_truth, "With --truth: timelines that eval scores.");
  app->add_option("--train-list", flags->train_list,
                  "UCF101 train split list (\"<class>/<file> <label>\" lines); needs --test-list.");
  app->add_option("--test-list", flags->test_list,
                  "UCF101 test split list (\"<class>/<file>\" lines); needs --train-list.");
  app->add_option("--class-index", flags->class_index,
                  "UCF101 classInd.txt: fixes the class order (default: directory names sorted).");
  app->add_option("--test-fraction", flags->test_fraction,
                  "Without split lists: the share of each class held out for testing.")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.9));
  app->add_option("--validation-fraction", flags->validation_fraction,
                  "The share of each class's training clips that chooses the epoch.")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.9));
}

void AddEmbedFlags(CLI::App* app, EmbedFlags* flags, bool with_work) {
  if (with_work) {
    app->add_option("--work", flags->work, "Work directory (created).")->required();
    app->add_option("--seed", flags->seed, "Seeds the split and the backbone's random weights.")
        ->capture_default_str();
  }
  app->add_option("--num-frames", flags->num_frames,
                  "Frames per clip with uniform sampling (the served model's default); with fps "
                  "sampling, the most kept (the first ones).")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app->add_option("--sampling", flags->sampling,
                  "uniform (--num-frames over the clip) or fps (--frames-per-second, every "
                  "frame of long clips).")
      ->capture_default_str()
      ->check(CLI::IsMember({"uniform", "fps"}));
  app->add_option("--frames-per-second", flags->frames_per_second,
                  "Rate of fps sampling (0: 1, or 4 with --truth, ClassifySegments's default).")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app->add_option("--crop-size", flags->crop_size, "Side of the square frames the backbone sees.")
      ->capture_default_str()
      ->check(CLI::Range(32, 1024));
  app->add_option("--resize-shorter-side", flags->resize_shorter_side,
                  "Shorter side before the centre crop.")
      ->capture_default_str()
      ->check(CLI::Range(32, 4096));
  app->add_option("--backbone-kernels", flags->backbone_kernels,
                  "eager: the backbone module as trained; fused or winograd: as vidclf-server "
                  "runs it (its --backbone-kernels, channels-last): embeddings within a relative "
                  "1e-4, winograd in about half eager's time. Not part of the cache's settings.")
      ->capture_default_str()
      ->check(CLI::IsMember({"eager", "fused", "winograd"}));
  app->add_option("--jobs", flags->jobs, "Clips embedded at once (0: one per core).")
      ->capture_default_str()
      ->check(CLI::Range(0, 256));
  app->add_option("--backbone-archive", flags->backbone_archive,
                  "ResNet18 weights from model/scripts/export_resnet18.py instead of seeded "
                  "random ones.");
}

namespace {

// The data set of --truth's timelines.
absl::StatusOr<Dataset> LoadTimelines(const DataFlags& data) {
  TimelineDatasetOptions options;
  options.train_truth = data.truth;
  options.validation_truth = data.validation_truth;
  options.test_truth = data.test_truth;
  options.class_index = data.class_index;
  return LoadTimelineDataset(options);
}

// The data set of --data's clips, by the split lists beside them unless others are named.
absl::StatusOr<Dataset> LoadClips(const DataFlags& data, uint64_t seed) {
  DatasetOptions options;
  options.root = data.data;
  options.train_list = data.train_list;
  options.test_list = data.test_list;
  options.class_index = data.class_index;
  if (options.train_list.empty() && options.test_list.empty()) {
    if (const std::optional<fs::path> splits = SynthSplitsBeside(data.data)) {
      options.train_list = (*splits / "trainlist01.txt").string();
      options.test_list = (*splits / "testlist01.txt").string();
      if (options.class_index.empty() && fs::exists(*splits / "classInd.txt")) {
        options.class_index = (*splits / "classInd.txt").string();
      }
      std::cout << "using the split lists beside the videos, in " << splits->string()
                << " (--train-list and --test-list choose others)" << std::endl;
    }
  }
  options.test_fraction = data.test_fraction;
  options.validation_fraction = data.validation_fraction;
  options.seed = seed;
  return LoadDataset(options);
}

}  // namespace

int RunEmbed(const DataFlags& data, const EmbedFlags& embed_flags) {
  if (embed_flags.resize_shorter_side < embed_flags.crop_size) {
    std::cerr << "vidclf-train embed: --resize-shorter-side must be at least --crop-size\n";
    return kExitUsage;
  }
  const bool timelines = !data.truth.empty();
  if (timelines == !data.data.empty()) {
    std::cerr << "vidclf-train embed: give --data (clips in the UCF101 layout) or --truth "
                 "(timelines), one of them\n";
    return kExitUsage;
  }
  if (!timelines && !(data.validation_truth.empty() && data.test_truth.empty())) {
    std::cerr << "vidclf-train embed: --validation-truth and --test-truth go with --truth\n";
    return kExitUsage;
  }
  EmbedFlags flags = embed_flags;
  if (flags.frames_per_second == 0) flags.frames_per_second = timelines ? 4 : 1;
  if (timelines) {
    // Every frame at the rate, as ClassifySegments samples a video (frame_sampler.h's kFps).
    flags.sampling = "fps";
    flags.num_frames = 0;
  }
  absl::StatusOr<Dataset> dataset = timelines ? LoadTimelines(data) : LoadClips(data, flags.seed);
  if (!dataset.ok()) {
    std::cerr << "vidclf-train embed: " << dataset.status().message() << "\n";
    return kExitUsage;
  }
  model::ModelConfig config;
  config.name = "backbone";
  config.version = "1";
  config.labels = dataset->classes;
  config.input.num_frames = timelines ? embed_flags.num_frames : flags.num_frames;
  config.input.crop_size = flags.crop_size;
  config.input.resize_shorter_side = flags.resize_shorter_side;
  absl::StatusOr<EmbeddingCache> cache =
      EmbeddingCache::Open(flags.work, EmbedSettings(flags, config.input));
  if (!cache.ok()) {
    std::cerr << "vidclf-train embed: " << cache.status().message() << "\n";
    return kExitUsage;
  }
  if (fs::exists(DatasetPath(flags.work))) {
    absl::StatusOr<nlohmann::json> earlier = ReadJsonFile(DatasetPath(flags.work));
    const absl::Status same = earlier.ok() ? SameSplit(*earlier, *dataset) : earlier.status();
    if (!same.ok()) {
      std::cerr << "vidclf-train embed: " << flags.work
                << " was embedded with another split: " << same.message()
                << "; use a new --work directory, or the same split\n";
      return kExitUsage;
    }
  }
  if (auto status = WriteJsonFile(DatasetToJson(*dataset), DatasetPath(flags.work)); !status.ok()) {
    std::cerr << "vidclf-train embed: " << status.message() << "\n";
    return kExitFailed;
  }
  const int jobs = flags.jobs > 0
                       ? flags.jobs
                       : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  // Clips run side by side, each on one intra-op thread: decoding does not stall the backbone.
  std::cout << model::ConfigureTorchThreads(1) << "; " << jobs << " clips at a time" << std::endl;
  absl::StatusOr<std::unique_ptr<model::VideoModel>> backbone =
      EmbeddingBackbone(flags, config, *cache);
  if (!backbone.ok()) {
    std::cerr << "vidclf-train embed: " << backbone.status().message() << "\n";
    return kExitFailed;
  }
  media::ClipOptions clip;
  clip.sampling.strategy = *media::ParseSamplingStrategy(flags.sampling);
  clip.sampling.num_frames = flags.num_frames;
  clip.sampling.frames_per_second = flags.frames_per_second;
  clip.decoder_threads = 1;
  std::cout << dataset->classes.size() << " classes, " << dataset->clips.size() << " clips ("
            << dataset->ClipsOf(Split::kTrain).size() << " train, "
            << dataset->ClipsOf(Split::kValidation).size() << " validation, "
            << dataset->ClipsOf(Split::kTest).size() << " test; " << dataset->split_source << ")"
            << std::endl;
  absl::StatusOr<EmbedReport> report = EmbedDataset(**backbone, *dataset, clip, *cache, jobs);
  if (!report.ok()) {
    std::cerr << "vidclf-train embed: " << report.status().message() << "\n";
    return kExitFailed;
  }
  std::ofstream skipped(fs::path(flags.work) / "skipped.txt");
  for (const SkippedClip& clip_skipped : report->skipped) {
    skipped << clip_skipped.path << "\t" << clip_skipped.reason << "\n";
    std::cerr << "skipped " << clip_skipped.path << ": " << clip_skipped.reason << "\n";
  }
  std::cout << "embedded " << report->embedded << " clips in " << report->seconds << " s, "
            << report->reused << " already cached, " << report->skipped.size()
            << " skipped (listed in " << (fs::path(flags.work) / "skipped.txt").string() << ")"
            << std::endl;
  return 0;
}

}  // namespace vidclf::train
