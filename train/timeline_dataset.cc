#include "train/timeline_dataset.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "train/segment_file.h"

namespace vidclf::train {
namespace {

namespace fs = std::filesystem;

// The deepest directory that holds every one of `files`.
fs::path CommonDirectory(const std::vector<fs::path>& files) {
  fs::path common = files.front().parent_path();
  for (const fs::path& file : files) {
    const fs::path directory = file.parent_path();
    fs::path shared;
    auto a = common.begin();
    auto b = directory.begin();
    for (; a != common.end() && b != directory.end() && *a == *b; ++a, ++b) shared /= *a;
    common = shared;
  }
  return common;
}

std::string SegmentName(const NamedSegment& segment) {
  return absl::StrFormat("segment %d (%s, %.3f to %.3f s)", segment.position, segment.label,
                         segment.start_seconds, segment.end_seconds);
}

// Checks one video's truth: segments in time order as written, none overlapping.
absl::Status CheckSegments(const std::string& where, const VideoSegments& video) {
  if (video.segments.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": video ", video.video, " has no segments to learn from"));
  }
  for (size_t i = 0; i < video.segments.size(); ++i) {
    const NamedSegment& segment = video.segments[i];
    if (segment.position != static_cast<int>(i)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": video ", video.video, ": ", SegmentName(segment),
                       " is listed out of time order; list each video's segments by their start"));
    }
    if (i > 0 && segment.start_seconds < video.segments[i - 1].end_seconds) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": video ", video.video, ": ",
                                                     SegmentName(segment), " overlaps ",
                                                     SegmentName(video.segments[i - 1])));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Dataset> LoadTimelineDataset(const TimelineDatasetOptions& options) {
  if (options.train_truth.empty()) {
    return absl::InvalidArgumentError("a timeline data set needs a training truth file");
  }
  struct SplitTruth {
    Split split;
    fs::path file;
    std::vector<VideoSegments> videos;
  };
  std::vector<SplitTruth> truths;
  for (const auto& [split, file] : {std::pair{Split::kTrain, options.train_truth},
                                    std::pair{Split::kValidation, options.validation_truth},
                                    std::pair{Split::kTest, options.test_truth}}) {
    if (file.empty()) continue;
    absl::StatusOr<std::vector<VideoSegments>> videos = ReadSegmentFile(file);
    if (!videos.ok()) return videos.status();
    truths.push_back({split, fs::absolute(file).lexically_normal(), *std::move(videos)});
  }
  Dataset dataset;
  if (!options.class_index.empty()) {
    if (auto status = ReadClassIndex(options.class_index, &dataset.classes); !status.ok()) {
      return status;
    }
  } else {
    std::set<std::string> labels;
    for (const SplitTruth& truth : truths) {
      for (const VideoSegments& video : truth.videos) {
        for (const NamedSegment& segment : video.segments) labels.insert(segment.label);
      }
    }
    dataset.classes.assign(labels.begin(), labels.end());
  }
  if (dataset.classes.size() < 2) {
    return absl::InvalidArgumentError(
        "a timeline data set needs at least two classes among its segments' labels");
  }
  std::map<std::string, int64_t> label_of;
  for (size_t i = 0; i < dataset.classes.size(); ++i) label_of[dataset.classes[i]] = i;

  std::vector<fs::path> files;
  for (const SplitTruth& truth : truths) files.push_back(truth.file);
  const fs::path root = CommonDirectory(files);
  dataset.root = root.string();
  std::set<std::string> seen;
  std::vector<std::string> sources;
  for (const SplitTruth& truth : truths) {
    const std::string where = truth.file.string();
    sources.push_back(absl::StrCat(SplitName(truth.split), " ", truth.file.filename().string()));
    for (const VideoSegments& video : truth.videos) {
      if (auto status = CheckSegments(where, video); !status.ok()) return status;
      const fs::path path = truth.file.parent_path() / video.video;
      std::error_code error;
      if (!fs::is_regular_file(path, error)) {
        return absl::NotFoundError(absl::StrCat(where, " names video ", video.video,
                                                ", which is not in ",
                                                truth.file.parent_path().string()));
      }
      Clip clip;
      clip.path = path.lexically_relative(root).string();
      clip.label = -1;
      clip.split = truth.split;
      if (!seen.insert(clip.path).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, " names video ", video.video, ", which another split has too"));
      }
      for (const NamedSegment& segment : video.segments) {
        const auto label = label_of.find(segment.label);
        if (label == label_of.end()) {
          return absl::InvalidArgumentError(absl::StrCat(
              where, ": video ", video.video, ": ", SegmentName(segment), "'s label is not one of ",
              "the classes (", absl::StrJoin(dataset.classes, ", "), ")"));
        }
        clip.segments.push_back({label->second, segment.start_seconds, segment.end_seconds});
      }
      dataset.clips.push_back(std::move(clip));
    }
  }
  if (dataset.ClipsOf(Split::kTrain).empty()) {
    return absl::InvalidArgumentError(absl::StrCat(options.train_truth, " names no videos"));
  }
  dataset.split_source = absl::StrCat("truth files: ", absl::StrJoin(sources, ", "));
  return dataset;
}

std::vector<int64_t> FrameLabels(const Clip& clip, int64_t num_frames, double frames_per_second) {
  std::vector<int64_t> labels(static_cast<size_t>(std::max<int64_t>(num_frames, 0)), -1);
  auto segment = clip.segments.begin();
  for (int64_t k = 0; k < num_frames; ++k) {
    const double time = (static_cast<double>(k) + 0.5) / frames_per_second;
    while (segment != clip.segments.end() && segment->end_seconds <= time) ++segment;
    if (segment != clip.segments.end() && segment->start_seconds <= time) {
      labels[static_cast<size_t>(k)] = segment->label;
    }
  }
  return labels;
}

}  // namespace vidclf::train
