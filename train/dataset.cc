#include "train/dataset.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace vidclf::train {
namespace {

namespace fs = std::filesystem;

// How many of `n` clips a share `fraction` is: rounded, but at least one whenever the share is
// positive and one clip can be spared.
int64_t ShareOf(int64_t n, double fraction) {
  if (fraction <= 0 || n < 2) return 0;
  return std::clamp<int64_t>(std::llround(static_cast<double>(n) * fraction), 1, n - 1);
}

// The non-empty, non-comment lines of a list file, with their 1-based line numbers.
absl::StatusOr<std::vector<std::pair<int, std::string>>> ReadLines(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::vector<std::pair<int, std::string>> lines;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const std::string stripped(absl::StripAsciiWhitespace(line));
    if (!stripped.empty() && stripped[0] != '#') lines.emplace_back(number, stripped);
  }
  return lines;
}

// "<class>/<file>" from a list line ("<class>/<file>[ <label>]"), with Windows separators, which
// some copies of UCF101's lists have, made portable.
std::string ListedPath(const std::string& line) {
  std::string path(absl::StripAsciiWhitespace(line.substr(0, line.find_first_of(" \t"))));
  std::replace(path.begin(), path.end(), '\\', '/');
  return path;
}

// Every video under root/<class>/, by class, paths relative to the root, in byte order.
absl::StatusOr<std::map<std::string, std::vector<std::string>>> ScanRoot(const std::string& root) {
  std::error_code error;
  if (!fs::is_directory(root, error)) {
    return absl::NotFoundError(absl::StrCat("data set root ", root, " is not a directory"));
  }
  std::map<std::string, std::vector<std::string>> videos;
  for (const fs::directory_entry& class_dir : fs::directory_iterator(root)) {
    const std::string name = class_dir.path().filename().string();
    if (!class_dir.is_directory() || name.empty() || name[0] == '.') continue;
    std::vector<std::string>& files = videos[name];
    for (const fs::directory_entry& file : fs::directory_iterator(class_dir.path())) {
      const std::string file_name = file.path().filename().string();
      if (file.is_regular_file() && HasVideoExtension(file_name)) {
        files.push_back(name + "/" + file_name);
      }
    }
    std::sort(files.begin(), files.end());
  }
  return videos;
}

absl::Status SplitByLists(const DatasetOptions& options,
                          const std::map<std::string, std::vector<std::string>>& videos,
                          const std::map<std::string, int64_t>& label_of, Dataset* dataset) {
  std::set<std::string> present;
  for (const auto& [name, files] : videos) present.insert(files.begin(), files.end());
  std::set<std::string> listed;
  for (const auto& [list, split] :
       {std::pair{options.train_list, Split::kTrain}, std::pair{options.test_list, Split::kTest}}) {
    absl::StatusOr<std::vector<std::pair<int, std::string>>> lines = ReadLines(list);
    if (!lines.ok()) return lines.status();
    for (const auto& [number, line] : *lines) {
      const std::string path = ListedPath(line);
      const std::string class_name = path.substr(0, path.find('/'));
      const auto label = label_of.find(class_name);
      if (label == label_of.end() || present.count(path) == 0) {
        return absl::NotFoundError(absl::StrCat(
            list, ":", number, ": ", path, " is not a video under ", options.root, "/<class>/"));
      }
      if (!listed.insert(path).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(list, ":", number, ": ", path, " is listed twice"));
      }
      dataset->clips.push_back({path, label->second, split, {}});
    }
  }
  dataset->split_source = absl::StrCat("lists ", fs::path(options.train_list).filename().string(),
                                       " and ", fs::path(options.test_list).filename().string());
  return absl::OkStatus();
}

void SplitStratified(const DatasetOptions& options,
                     const std::map<std::string, std::vector<std::string>>& videos,
                     const std::map<std::string, int64_t>& label_of, Dataset* dataset) {
  for (const std::string& name : dataset->classes) {
    std::vector<std::string> files = videos.at(name);
    std::mt19937_64 rng(options.seed * 1000003ULL + static_cast<uint64_t>(label_of.at(name)));
    std::shuffle(files.begin(), files.end(), rng);
    const int64_t test = ShareOf(static_cast<int64_t>(files.size()), options.test_fraction);
    for (size_t i = 0; i < files.size(); ++i) {
      dataset->clips.push_back({files[i],
                                label_of.at(name),
                                static_cast<int64_t>(i) < test ? Split::kTest : Split::kTrain,
                                {}});
    }
  }
  dataset->split_source =
      absl::StrCat("stratified, seed ", options.seed, ", test fraction ", options.test_fraction);
}

// Moves a stratified share of each class's training clips to validation.
void HoldOutValidation(const DatasetOptions& options, Dataset* dataset) {
  std::map<int64_t, std::vector<Clip*>> train_by_class;
  for (Clip& clip : dataset->clips) {
    if (clip.split == Split::kTrain) train_by_class[clip.label].push_back(&clip);
  }
  for (auto& [label, clips] : train_by_class) {
    std::mt19937_64 rng(options.seed * 7919ULL + static_cast<uint64_t>(label) + 1);
    std::shuffle(clips.begin(), clips.end(), rng);
    const int64_t validation =
        ShareOf(static_cast<int64_t>(clips.size()), options.validation_fraction);
    for (int64_t i = 0; i < validation; ++i) clips[i]->split = Split::kValidation;
  }
}

}  // namespace

const char* SplitName(Split split) {
  switch (split) {
    case Split::kTrain:
      return "train";
    case Split::kValidation:
      return "validation";
    case Split::kTest:
      return "test";
  }
  return "?";
}

std::vector<Clip> Dataset::ClipsOf(Split split) const {
  std::vector<Clip> selected;
  for (const Clip& clip : clips) {
    if (clip.split == split) selected.push_back(clip);
  }
  return selected;
}

bool HasVideoExtension(const std::string& file_name) {
  static const std::set<std::string> kExtensions = {".3gp", ".avi", ".flv",  ".m4v", ".mkv",
                                                    ".mov", ".mp4", ".mpeg", ".mpg", ".mts",
                                                    ".ogv", ".ts",  ".webm", ".wmv"};
  return kExtensions.count(absl::AsciiStrToLower(fs::path(file_name).extension().string())) > 0;
}

absl::StatusOr<Dataset> LoadDataset(const DatasetOptions& options) {
  if (options.train_list.empty() != options.test_list.empty()) {
    return absl::InvalidArgumentError("give both split lists (train and test) or neither");
  }
  if (options.test_fraction < 0 || options.test_fraction >= 1 || options.validation_fraction < 0 ||
      options.validation_fraction >= 1) {
    return absl::InvalidArgumentError("the test and validation fractions must be in [0, 1)");
  }
  absl::StatusOr<std::map<std::string, std::vector<std::string>>> videos = ScanRoot(options.root);
  if (!videos.ok()) return videos.status();
  Dataset dataset;
  dataset.root = options.root;
  if (!options.class_index.empty()) {
    if (auto status = ReadClassIndex(options.class_index, &dataset.classes); !status.ok()) {
      return status;
    }
    for (const std::string& name : dataset.classes) {
      if (videos->count(name) == 0) {
        return absl::NotFoundError(absl::StrCat(options.class_index, " names class ", name,
                                                ", which has no directory under ", options.root));
      }
    }
  } else {
    for (const auto& [name, files] : *videos) dataset.classes.push_back(name);
  }
  for (const std::string& name : dataset.classes) {
    if (videos->at(name).empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("class ", name, " has no videos under ", options.root, "/", name));
    }
  }
  if (dataset.classes.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        options.root, " needs at least two class directories with videos (ROOT/<class>/<video>)"));
  }
  std::map<std::string, int64_t> label_of;
  for (size_t i = 0; i < dataset.classes.size(); ++i) label_of[dataset.classes[i]] = i;
  if (!options.train_list.empty()) {
    if (auto status = SplitByLists(options, *videos, label_of, &dataset); !status.ok()) {
      return status;
    }
  } else {
    SplitStratified(options, *videos, label_of, &dataset);
  }
  HoldOutValidation(options, &dataset);
  if (dataset.ClipsOf(Split::kTrain).empty()) {
    return absl::InvalidArgumentError("the split leaves no training clips");
  }
  return dataset;
}

absl::Status ReadClassIndex(const std::string& path, std::vector<std::string>* classes) {
  absl::StatusOr<std::vector<std::pair<int, std::string>>> lines = ReadLines(path);
  if (!lines.ok()) return lines.status();
  std::map<int64_t, std::string> by_index;
  for (const auto& [number, line] : *lines) {
    std::vector<std::string> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    int64_t index = 0;
    if (fields.size() != 2 || !absl::SimpleAtoi(fields[0], &index) || index < 1 ||
        !by_index.emplace(index, fields[1]).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ":", number, ": expected \"<index> <class>\" with a new index from 1; got \"", line,
          "\""));
    }
  }
  classes->clear();
  for (const auto& [index, name] : by_index) classes->push_back(name);
  return absl::OkStatus();
}

bool Dataset::HasTimelines() const {
  return std::any_of(clips.begin(), clips.end(),
                     [](const Clip& clip) { return !clip.segments.empty(); });
}

nlohmann::json DatasetToJson(const Dataset& dataset) {
  nlohmann::json clips = nlohmann::json::array();
  for (const Clip& clip : dataset.clips) {
    nlohmann::json item = {
        {"path", clip.path}, {"label", clip.label}, {"split", SplitName(clip.split)}};
    if (!clip.segments.empty()) {
      nlohmann::json segments = nlohmann::json::array();
      for (const ClipSegment& segment : clip.segments) {
        segments.push_back({segment.label, segment.start_seconds, segment.end_seconds});
      }
      item["segments"] = std::move(segments);
    }
    clips.push_back(std::move(item));
  }
  return {{"root", dataset.root},
          {"classes", dataset.classes},
          {"split_source", dataset.split_source},
          {"clips", clips}};
}

absl::StatusOr<Dataset> DatasetFromJson(const nlohmann::json& json) {
  Dataset dataset;
  try {
    dataset.root = json.at("root").get<std::string>();
    dataset.classes = json.at("classes").get<std::vector<std::string>>();
    dataset.split_source = json.at("split_source").get<std::string>();
    for (const nlohmann::json& item : json.at("clips")) {
      Clip clip;
      clip.path = item.at("path").get<std::string>();
      clip.label = item.at("label").get<int64_t>();
      const std::string split = item.at("split").get<std::string>();
      if (split == "train") {
        clip.split = Split::kTrain;
      } else if (split == "validation") {
        clip.split = Split::kValidation;
      } else if (split == "test") {
        clip.split = Split::kTest;
      } else {
        return absl::InvalidArgumentError(absl::StrCat("unknown split \"", split, "\""));
      }
      const auto num_classes = static_cast<int64_t>(dataset.classes.size());
      if (item.contains("segments")) {
        for (const nlohmann::json& segment : item.at("segments")) {
          clip.segments.push_back({segment.at(0).get<int64_t>(), segment.at(1).get<double>(),
                                   segment.at(2).get<double>()});
          if (clip.segments.back().label < 0 || clip.segments.back().label >= num_classes) {
            return absl::InvalidArgumentError(
                absl::StrCat(clip.path, " has a segment outside the class list"));
          }
        }
      } else if (clip.label < 0 || clip.label >= num_classes) {
        return absl::InvalidArgumentError(
            absl::StrCat(clip.path, " has label ", clip.label, " outside the class list"));
      }
      dataset.clips.push_back(std::move(clip));
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("data set description: ", e.what()));
  }
  return dataset;
}

}  // namespace vidclf::train
