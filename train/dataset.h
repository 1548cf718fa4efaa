// A labelled video data set in the UCF101 layout, ROOT/<class>/<video>, split into training,
// validation and test clips: by UCF101-format split lists when given, else stratified by seed.
#ifndef VIDCLF_TRAIN_DATASET_H_
#define VIDCLF_TRAIN_DATASET_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace vidclf::train {

enum class Split { kTrain, kValidation, kTest };

// "train", "validation" or "test".
const char* SplitName(Split split);

// What happens in a part of a long video (a timeline), in seconds from its start.
struct ClipSegment {
  int64_t label = 0;  // index into Dataset::classes
  double start_seconds = 0;
  double end_seconds = 0;
};

struct Clip {
  std::string path;   // relative to the data set's root: "<class>/<file>"
  int64_t label = 0;  // index into Dataset::classes; -1 for a timeline
  Split split = Split::kTrain;
  // A timeline's segments, in time order, without overlaps (timeline_dataset.h); empty for a
  // clip of one class.
  std::vector<ClipSegment> segments;
};

struct Dataset {
  std::string root;
  // Class names: the sub-directories of the root in byte order, or classInd.txt's order.
  std::vector<std::string> classes;
  std::vector<Clip> clips;
  // How the split was made, for provenance: "lists trainlist01.txt/testlist01.txt" or
  // "stratified, seed 1".
  std::string split_source;

  std::vector<Clip> ClipsOf(Split split) const;
  // Whether its videos are timelines, labelled per segment: heads train on it per frame.
  bool HasTimelines() const;
};

struct DatasetOptions {
  std::string root;
  // UCF101's split lists: a train list of "<class>/<file>[ <1-based label>]" lines and a test
  // list of "<class>/<file>" lines. Both or neither. Clips in neither list are left out.
  std::string train_list;
  std::string test_list;
  // Optional classInd.txt ("<1-based index> <class>"): fixes the class order.
  std::string class_index;
  // Without lists: the share of each class held out for testing.
  double test_fraction = 0.25;
  // The share of each class's training clips held out to choose the epoch (early stopping).
  double validation_fraction = 0.15;
  uint64_t seed = 1;
};

// A classInd.txt ("<1-based index> <class>" lines) as the class names in index order;
// INVALID_ARGUMENT naming the line that is not one.
absl::Status ReadClassIndex(const std::string& path, std::vector<std::string>* classes);

// Files with these extensions are taken as videos; anything else under a class directory (a
// README, a thumbnail) is ignored.
bool HasVideoExtension(const std::string& file_name);

// Scans the root and splits it. INVALID_ARGUMENT or NOT_FOUND with a message naming the
// directory, list file, line or class that is wrong (e.g. a list naming a file that does not
// exist, a class with no videos, fewer than two classes).
absl::StatusOr<Dataset> LoadDataset(const DatasetOptions& options);

nlohmann::json DatasetToJson(const Dataset& dataset);
absl::StatusOr<Dataset> DatasetFromJson(const nlohmann::json& json);

}  // namespace vidclf::train

#endif  // VIDCLF_TRAIN_DATASET_H_
