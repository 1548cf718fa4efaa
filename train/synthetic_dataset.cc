#include "train/synthetic_dataset.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "media/video_encoder.h"
#include "train/parallel_jobs.h"
#include "train/segment_file.h"

namespace vidclf::train {
namespace {

namespace fs = std::filesystem;

constexpr int kClipsPerGroup = 5;

absl::Status CreateDirectory(const fs::path& path) {
  std::error_code error;
  fs::create_directories(path, error);
  if (error) {
    return absl::Status(
        absl::ErrnoToStatusCode(error.value()),
        absl::StrCat("cannot create directory ", path.string(), ": ", error.message()));
  }
  return absl::OkStatus();
}

// Writes `bytes` to `path` through a temporary file beside it and a rename, so that `path` is
// either absent, its old self or complete.
absl::Status WriteFileAtomically(const fs::path& path, const std::string& bytes) {
  const std::string final_name = path.string();
  const std::string partial = final_name + ".partial";
  std::FILE* file = std::fopen(partial.c_str(), "wb");
  if (file == nullptr) return absl::ErrnoToStatus(errno, absl::StrCat("cannot create ", partial));
  const bool written = std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size();
  const int write_error = errno;
  const bool closed = std::fclose(file) == 0;
  const int close_error = errno;
  if (!written || !closed) {
    std::remove(partial.c_str());
    return absl::ErrnoToStatus(written ? close_error : write_error,
                               absl::StrCat("cannot write ", partial));
  }
  if (std::rename(partial.c_str(), final_name.c_str()) != 0) {
    const int rename_error = errno;
    std::remove(partial.c_str());
    return absl::ErrnoToStatus(rename_error,
                               absl::StrCat("cannot rename ", partial, " to ", final_name));
  }
  return absl::OkStatus();
}

absl::Status Validate(const SyntheticDatasetOptions& options) {
  if (options.output_dir.empty()) return absl::InvalidArgumentError("output_dir is empty");
  if (options.videos_per_class < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("videos_per_class must be at least 1; got ", options.videos_per_class));
  }
  if (!(options.test_fraction >= 0 && options.test_fraction < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("test_fraction must be in [0, 1); got ", options.test_fraction));
  }
  if (options.video.min_frames < 1 || options.video.max_frames < options.video.min_frames) {
    return absl::InvalidArgumentError(
        absl::StrCat("frame counts must satisfy 1 <= min_frames <= max_frames; got min_frames ",
                     options.video.min_frames, ", max_frames ", options.video.max_frames));
  }
  return absl::OkStatus();
}

int TestVideosPerClass(int videos, double fraction) {
  int test = static_cast<int>(std::lround(videos * fraction));
  if (fraction > 0 && test == 0) test = 1;
  return std::min(test, videos - 1);  // keep at least one training video
}

}  // namespace

std::string SyntheticVideoFileName(const std::string& label_name, int index,
                                   const std::string& extension) {
  return absl::StrFormat("v_%s_g%02d_c%02d.%s", label_name, index / kClipsPerGroup + 1,
                         index % kClipsPerGroup + 1, extension);
}

absl::StatusOr<SyntheticDatasetSummary> WriteSyntheticDataset(
    const SyntheticDatasetOptions& options, const std::function<void(int, int)>& on_video) {
  if (auto status = Validate(options); !status.ok()) return status;
  const std::vector<std::string>& labels = SyntheticLabels();
  const fs::path root(options.output_dir);
  const fs::path videos_dir = root / "videos";
  const fs::path splits_dir = root / "splits";
  if (auto status = CreateDirectory(splits_dir); !status.ok()) return status;

  const int per_class = options.videos_per_class;
  const int test_per_class = TestVideosPerClass(per_class, options.test_fraction);
  const int num_labels = static_cast<int>(labels.size());
  const int total = per_class * num_labels;
  SyntheticDatasetSummary summary;
  for (const std::string& name : labels) {
    if (auto status = CreateDirectory(videos_dir / name); !status.ok()) return status;
  }
  // Each video depends only on its label, index and seed, and encodes on one thread, so they are
  // made on every core at once; the lists are then written in order, as one thread would.
  std::vector<std::string> files(total);
  std::mutex mutex;
  absl::Status failure;
  RunParallelJobs(total, static_cast<int>(std::thread::hardware_concurrency()), [&](int i) {
    const int label = i / per_class;
    const int index = i % per_class;
    const SyntheticVideoFormat format =
        DescribeSyntheticVideo(label, index, options.seed, options.video);
    const std::string file = SyntheticVideoFileName(labels[label], index, format.extension);
    const fs::path path = videos_dir / labels[label] / file;
    absl::StatusOr<std::string> video = media::EncodeVideo(
        MakeSyntheticVideo(label, index, options.seed, options.video), format.encode);
    absl::Status status = absl::OkStatus();
    if (!video.ok()) {
      status = absl::InternalError(
          absl::StrCat("cannot encode ", path.string(), " (", format.encode.codec, " in ",
                       format.encode.container, "): ", video.status().message()));
    } else {
      status = WriteFileAtomically(path, *video);
    }
    std::lock_guard<std::mutex> lock(mutex);
    if (!status.ok()) {
      if (failure.ok()) failure = status;
      return false;  // the others stop after their current video
    }
    files[i] = file;
    summary.bytes += static_cast<int64_t>(video->size());
    ++summary.videos;
    if (on_video) on_video(summary.videos, total);
    return true;
  });
  if (!failure.ok()) return failure;

  std::string class_index;
  std::string train_list;
  std::string test_list;
  for (int label = 0; label < num_labels; ++label) {
    const std::string& name = labels[label];
    absl::StrAppend(&class_index, label + 1, " ", name, "\n");
    for (int index = 0; index < per_class; ++index) {
      const std::string& file = files[label * per_class + index];
      if (index >= per_class - test_per_class) {
        absl::StrAppend(&test_list, name, "/", file, "\n");
        ++summary.test_videos;
      } else {
        absl::StrAppend(&train_list, name, "/", file, " ", label + 1, "\n");
        ++summary.train_videos;
      }
    }
  }
  // The lists last: a data set with lists is complete.
  for (const auto& [file, text] :
       {std::pair<const char*, const std::string*>{"classInd.txt", &class_index},
        {"trainlist01.txt", &train_list},
        {"testlist01.txt", &test_list}}) {
    if (auto status = WriteFileAtomically(splits_dir / file, *text); !status.ok()) return status;
    summary.bytes += static_cast<int64_t>(text->size());
  }
  return summary;
}

absl::StatusOr<int64_t> WriteSyntheticTimelines(const SyntheticTimelinesOptions& options,
                                                const std::function<void(int, int)>& on_video) {
  if (options.timelines < 1) return absl::InvalidArgumentError("timelines must be at least 1");
  if (auto status = CheckTimelineOptions(options.timeline); !status.ok()) return status;
  const fs::path root(options.output_dir);
  if (auto status = CreateDirectory(root); !status.ok()) return status;
  const std::vector<std::string>& labels = SyntheticLabels();
  std::vector<VideoSegments> truth(options.timelines);
  std::mutex mutex;
  absl::Status failure;
  int64_t bytes = 0;
  int done = 0;
  RunParallelJobs(
      options.timelines, static_cast<int>(std::thread::hardware_concurrency()), [&](int i) {
        const std::string file = absl::StrFormat("timeline-%03d.mp4", i);
        absl::StatusOr<SyntheticTimeline> timeline =
            MakeSyntheticTimeline(i, options.seed, options.timeline);
        absl::Status status = timeline.status();
        if (status.ok()) status = WriteFileAtomically(root / file, timeline->video);
        std::lock_guard<std::mutex> lock(mutex);
        if (!status.ok()) {
          if (failure.ok()) failure = status;
          return false;
        }
        VideoSegments& video = truth[i];
        video.video = file;
        video.duration_seconds = timeline->duration_seconds;
        for (const TimelineSegment& segment : timeline->segments) {
          video.segments.push_back(
              {labels[segment.label], segment.start_seconds, segment.end_seconds, {}, {}});
        }
        bytes += static_cast<int64_t>(timeline->video.size());
        if (on_video) on_video(++done, options.timelines);
        return true;
      });
  if (!failure.ok()) return failure;
  const std::string text = SegmentFileText(truth);
  if (auto status = WriteFileAtomically(root / "truth.json", text); !status.ok()) return status;
  return bytes + static_cast<int64_t>(text.size());
}

}  // namespace vidclf::train
