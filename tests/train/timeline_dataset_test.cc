// Timelines to train per frame: truth files per split, the videos beside them (empty files here:
// nothing is decoded before embed), errors that name the file, video and segment at fault, and
// the label each sampled frame gets.
#include "train/timeline_dataset.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace vidclf::train::timeline_dataset_test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class TimelineDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) /
            ("timeline_dataset_test_" +
             std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(root_);
    for (const char* split : {"train", "test"}) {
      fs::create_directories(root_ / split);
      for (const char* video : {"a.mp4", "b.mp4"}) std::ofstream(root_ / split / video);
    }
  }
  void TearDown() override { fs::remove_all(root_); }

  // Writes `videos` (the segment file's "videos" array) as SPLIT/truth.json.
  std::string Truth(const std::string& split, const std::string& videos) {
    const std::string path = (root_ / split / "truth.json").string();
    std::ofstream(path) << "{\"videos\": " << videos << "}";
    return path;
  }

  absl::Status ErrorOf(const std::string& train_videos) {
    TimelineDatasetOptions options;
    options.train_truth = Truth("train", train_videos);
    return LoadTimelineDataset(options).status();
  }

  fs::path root_;
};

constexpr char kTrainVideos[] = R"([
  {"video": "a.mp4", "segments": [{"label": "zoom", "start_seconds": 0, "end_seconds": 2},
                                  {"label": "fade", "start_seconds": 2.5, "end_seconds": 4}]},
  {"video": "b.mp4", "segments": [{"label": "fade", "start_seconds": 0, "end_seconds": 3}]}])";

TEST_F(TimelineDatasetTest, SplitsComeFromTheirTruthFilesWithTheirSegments) {
  TimelineDatasetOptions options;
  options.train_truth = Truth("train", kTrainVideos);
  options.test_truth = Truth("test", R"([{"video": "a.mp4",
                   "segments": [{"label": "zoom", "start_seconds": 0, "end_seconds": 1}]}])");
  absl::StatusOr<Dataset> dataset = LoadTimelineDataset(options);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_TRUE(dataset->HasTimelines());
  EXPECT_EQ(dataset->classes, (std::vector<std::string>{"fade", "zoom"}));  // byte order
  EXPECT_EQ(dataset->root, root_.string());
  ASSERT_EQ(dataset->ClipsOf(Split::kTrain).size(), 2u);
  ASSERT_EQ(dataset->ClipsOf(Split::kTest).size(), 1u);
  EXPECT_TRUE(dataset->ClipsOf(Split::kValidation).empty());
  const Clip a = dataset->ClipsOf(Split::kTrain).front();
  EXPECT_EQ(a.path, "train/a.mp4");
  EXPECT_EQ(a.label, -1);
  ASSERT_EQ(a.segments.size(), 2u);
  EXPECT_EQ(a.segments[1].label, 0);
  EXPECT_EQ(a.segments[1].start_seconds, 2.5);
  EXPECT_EQ(dataset->ClipsOf(Split::kTest).front().path, "test/a.mp4");
}

TEST_F(TimelineDatasetTest, AClassIndexFixesTheOrderAndRefusesOtherLabels) {
  const std::string index = (root_ / "classInd.txt").string();
  std::ofstream(index) << "1 zoom\n2 fade\n3 pan\n";
  TimelineDatasetOptions options;
  options.train_truth = Truth("train", kTrainVideos);
  options.class_index = index;
  absl::StatusOr<Dataset> dataset = LoadTimelineDataset(options);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_EQ(dataset->classes, (std::vector<std::string>{"zoom", "fade", "pan"}));
  EXPECT_EQ(dataset->ClipsOf(Split::kTrain).front().segments[1].label, 1);

  std::ofstream(index) << "1 zoom\n2 pan\n";
  const absl::Status status = LoadTimelineDataset(options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("video a.mp4: segment 1 (fade, 2.500 to 4.000 s)'s label is not one of "
                        "the classes (zoom, pan)"));
}

TEST_F(TimelineDatasetTest, RefusesTruthItCannotLearnFromNamingWhere) {
  absl::Status status = ErrorOf(
      R"([{"video": "c.mp4", "segments": [{"label": "x", "start_seconds": 0, "end_seconds": 1}]},
          {"video": "a.mp4", "segments": [{"label": "y", "start_seconds": 0, "end_seconds": 1}]}])");
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()), HasSubstr("names video c.mp4, which is not in"));

  status = ErrorOf(R"([{"video": "a.mp4", "segments": []},)"
                   R"( {"video": "b.mp4", "segments": [)"
                   R"(   {"label": "x", "start_seconds": 0, "end_seconds": 1},)"
                   R"(   {"label": "y", "start_seconds": 1, "end_seconds": 2}]}])");
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("video a.mp4 has no segments to learn from"));

  status = ErrorOf(
      R"([{"video": "a.mp4", "segments": [{"label": "x", "start_seconds": 0, "end_seconds": 2},
                                          {"label": "y", "start_seconds": 1, "end_seconds": 3}]}])");
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("segment 1 (y, 1.000 to 3.000 s) overlaps segment 0"));

  status = ErrorOf(
      R"([{"video": "a.mp4", "segments": [{"label": "y", "start_seconds": 2, "end_seconds": 3},
                                          {"label": "x", "start_seconds": 0, "end_seconds": 1}]}])");
  EXPECT_THAT(std::string(status.message()), HasSubstr("is listed out of time order"));

  status = ErrorOf(
      R"([{"video": "a.mp4", "segments": [{"label": "x", "start_seconds": 0, "end_seconds": 2}]}])");
  EXPECT_THAT(std::string(status.message()), HasSubstr("at least two classes"));

  TimelineDatasetOptions options;
  options.train_truth = Truth("train", kTrainVideos);
  options.validation_truth = options.train_truth;
  status = LoadTimelineDataset(options).status();
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("names video a.mp4, which another split has too"));
}

// Frame k, sampled at 2 frames/s, is labelled at (k + 0.5) / 2 s: the gap between a's segments
// and the time after them are no class (-1).
TEST_F(TimelineDatasetTest, EachSampledFrameTakesTheLabelOfItsMoment) {
  TimelineDatasetOptions options;
  options.train_truth = Truth("train", kTrainVideos);
  absl::StatusOr<Dataset> dataset = LoadTimelineDataset(options);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  const Clip a = dataset->ClipsOf(Split::kTrain).front();
  EXPECT_EQ(FrameLabels(a, 10, 2.0), (std::vector<int64_t>{1, 1, 1, 1, -1, 0, 0, 0, -1, -1}));
  EXPECT_TRUE(FrameLabels(a, 0, 2.0).empty());
}

}  // namespace
}  // namespace vidclf::train::timeline_dataset_test
