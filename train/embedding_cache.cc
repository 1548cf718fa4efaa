#include "train/embedding_cache.h"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "common/json_text.h"
#include "pipeline/video_pipeline.h"
#include "train/parallel_jobs.h"
#include "train/progress.h"

namespace vidclf::train {
namespace {

namespace fs = std::filesystem;

constexpr char kSettingsFile[] = "embed.json";

// The first key path at which two JSON documents differ, for an error a user can act on.
std::string FirstDifference(const nlohmann::json& a, const nlohmann::json& b,
                            const std::string& path = "") {
  if (a.is_object() && b.is_object()) {
    for (const auto& item : a.items()) {
      if (!b.contains(item.key())) return path + item.key();
      std::string inner = FirstDifference(item.value(), b.at(item.key()), path + item.key() + ".");
      if (!inner.empty()) return inner;
    }
    for (const auto& item : b.items()) {
      if (!a.contains(item.key())) return path + item.key();
    }
    return "";
  }
  return a == b ? "" : (path.empty() ? std::string("(root)") : path.substr(0, path.size() - 1));
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// One clip of `dataset` decoded and embedded by `model`'s backbone: [T, 512] on the host.
absl::StatusOr<torch::Tensor> EmbedClip(const model::VideoModel& model, const Dataset& dataset,
                                        const Clip& clip, const media::ClipOptions& clip_options) {
  absl::StatusOr<std::string> bytes = ReadFile((fs::path(dataset.root) / clip.path).string());
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<pipeline::EmbeddedVideo> embedded =
      pipeline::DecodeAndEmbed(model, media::VideoSource::Bytes(*bytes), clip_options);
  if (!embedded.ok()) return embedded.status();
  if (embedded->embeddings.size(0) == 0) {
    return absl::InvalidArgumentError("no frames decoded");
  }
  return embedded->embeddings;
}

}  // namespace

absl::StatusOr<torch::Tensor> DecodeClipFrames(const model::VideoModel& model,
                                               const Dataset& dataset, const Clip& clip,
                                               const media::ClipOptions& clip_options) {
  absl::StatusOr<std::string> bytes = ReadFile((fs::path(dataset.root) / clip.path).string());
  if (!bytes.ok()) return bytes.status();
  const media::ClipOptions options = pipeline::WithModelPreprocessing(model, clip_options);
  absl::StatusOr<media::DecodedClip> decoded =
      media::DecodeClip(media::VideoSource::Bytes(*bytes), options);
  if (!decoded.ok()) return decoded.status();
  // The tensor borrows the decoded pixels: cloned before they go.
  return pipeline::FramesTensor(decoded->pixels.data(), decoded->num_frames, decoded->crop_size,
                                options.preprocess.channels_last)
      .clone();
}

absl::StatusOr<media::ClipOptions> SamplingOfSettings(const nlohmann::json& settings) {
  const nlohmann::json sampling = settings.value("sampling", nlohmann::json::object());
  absl::StatusOr<media::SamplingStrategy> strategy =
      media::ParseSamplingStrategy(sampling.value("strategy", std::string()));
  if (!strategy.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the cache's settings record no sampling: ", strategy.status().message()));
  }
  media::ClipOptions options;
  options.sampling.strategy = *strategy;
  options.sampling.num_frames = sampling.value("num_frames", options.sampling.num_frames);
  options.sampling.frames_per_second =
      sampling.value("frames_per_second", options.sampling.frames_per_second);
  options.decoder_threads = 1;
  return options;
}

absl::StatusOr<std::vector<torch::Tensor>> EmbedClips(const model::VideoModel& model,
                                                      const Dataset& dataset,
                                                      const std::vector<Clip>& clips,
                                                      const media::ClipOptions& clip_options,
                                                      int jobs) {
  std::vector<absl::StatusOr<torch::Tensor>> embedded(clips.size(),
                                                      absl::CancelledError("not embedded"));
  Progress progress("clips", static_cast<int64_t>(clips.size()));
  std::atomic<bool> failed{false};
  RunParallelJobs(static_cast<int>(clips.size()), jobs, [&](int i) {
    embedded[i] = EmbedClip(model, dataset, clips[i], clip_options);
    progress.Advance(1, "");
    if (!embedded[i].ok()) failed = true;
    return !failed;
  });
  progress.Finish();
  std::vector<torch::Tensor> tensors;
  for (size_t i = 0; i < clips.size(); ++i) {
    if (!embedded[i].ok() && !absl::IsCancelled(embedded[i].status())) {
      return absl::Status(embedded[i].status().code(),
                          absl::StrCat(clips[i].path, ": ", embedded[i].status().message()));
    }
  }
  for (absl::StatusOr<torch::Tensor>& tensor : embedded) tensors.push_back(*std::move(tensor));
  return tensors;
}

absl::StatusOr<EmbeddingCache> EmbeddingCache::Open(const std::string& work_dir,
                                                    const nlohmann::json& settings) {
  std::error_code error;
  fs::create_directories(fs::path(work_dir) / "embeddings", error);
  if (error) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create ", work_dir, "/embeddings: ", error.message()));
  }
  const fs::path settings_path = fs::path(work_dir) / kSettingsFile;
  if (fs::exists(settings_path)) {
    std::ifstream in(settings_path);
    const nlohmann::json existing = nlohmann::json::parse(in, nullptr, false);
    if (existing.is_discarded()) {
      return absl::FailedPreconditionError(
          absl::StrCat(settings_path.string(), " is not valid JSON; remove the work directory"));
    }
    if (existing != settings) {
      return absl::FailedPreconditionError(
          absl::StrCat("the embeddings in ", work_dir, " were made with another ",
                       FirstDifference(existing, settings),
                       " than asked for now; use a new --work directory, or the same settings"));
    }
  } else {
    std::ofstream out(settings_path);
    out << JsonText(settings, 2) << "\n";
    if (!out)
      return absl::PermissionDeniedError(absl::StrCat("cannot write ", settings_path.string()));
  }
  return EmbeddingCache(work_dir, settings);
}

std::string EmbeddingCache::backbone_dir() const {
  return (fs::path(work_dir_) / "backbone").string();
}

std::string EmbeddingCache::PathFor(const Clip& clip) const {
  return (fs::path(work_dir_) / "embeddings" / (clip.path + ".pt")).string();
}

bool EmbeddingCache::Has(const Clip& clip) const { return fs::exists(PathFor(clip)); }

absl::Status EmbeddingCache::Put(const Clip& clip, const torch::Tensor& embeddings) const {
  const fs::path path = PathFor(clip);
  const fs::path partial = path.string() + ".partial";
  try {
    fs::create_directories(path.parent_path());
    torch::save(embeddings.contiguous(), partial.string());
    fs::rename(partial, path);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("cannot write ", path.string(), ": ", e.what()));
  }
  return absl::OkStatus();
}

absl::StatusOr<torch::Tensor> EmbeddingCache::Get(const Clip& clip) const {
  torch::Tensor embeddings;
  try {
    torch::load(embeddings, PathFor(clip));
  } catch (const c10::Error& e) {
    return absl::DataLossError(absl::StrCat("cannot read ", PathFor(clip), ": ",
                                            e.what_without_backtrace(),
                                            "; delete it and run embed again"));
  }
  return embeddings;
}

absl::StatusOr<EmbedReport> EmbedDataset(const model::VideoModel& model, const Dataset& dataset,
                                         const media::ClipOptions& clip_options,
                                         const EmbeddingCache& cache, int jobs) {
  const auto start = std::chrono::steady_clock::now();
  EmbedReport report;
  std::vector<const Clip*> pending;
  for (const Clip& clip : dataset.clips) {
    if (cache.Has(clip)) {
      ++report.reused;
    } else {
      pending.push_back(&clip);
    }
  }
  if (report.reused > 0) {
    std::fprintf(stderr, "%ld clips already embedded in %s\n", static_cast<long>(report.reused),
                 cache.work_dir().c_str());
  }
  Progress progress("clips", static_cast<int64_t>(pending.size()));
  std::mutex mutex;
  absl::Status failure;
  RunParallelJobs(static_cast<int>(pending.size()), jobs, [&](int i) {
    const Clip& clip = *pending[i];
    absl::StatusOr<torch::Tensor> embedded = EmbedClip(model, dataset, clip, clip_options);
    std::string note;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!embedded.ok()) {
        report.skipped.push_back({clip.path, std::string(embedded.status().message())});
        note = "skipped " + clip.path;
      } else if (absl::Status put = cache.Put(clip, *embedded); !put.ok()) {
        if (failure.ok()) failure = put;
      } else {
        ++report.embedded;
      }
    }
    progress.Advance(1, note);
    return true;
  });
  progress.Finish();
  if (!failure.ok()) return failure;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace vidclf::train
