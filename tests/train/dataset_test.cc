// Data sets in the UCF101 layout: the split by lists or by seed, and errors that name the line or
// directory at fault. The "videos" here are empty files: nothing is decoded before embed.
#include "train/dataset.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace vidclf::train {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class DatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) /
            ("dataset_test_" +
             std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(root_);
    for (const char* name : {"Punch", "CricketShot"}) {
      fs::create_directories(root_ / "videos" / name);
      for (int i = 1; i <= 10; ++i) {
        std::ofstream(root_ / "videos" / name /
                      ("v_" + std::string(name) + "_g0" + std::to_string(i % 3 + 1) + "_c0" +
                       std::to_string(i) + ".avi"));
      }
      std::ofstream(root_ / "videos" / name / "README.txt") << "not a video";
    }
  }
  void TearDown() override { fs::remove_all(root_); }

  fs::path root_;
};

TEST_F(DatasetTest, StratifiedSplitIsSeededAndCoversEveryVideoOnce) {
  DatasetOptions options;
  options.root = (root_ / "videos").string();
  absl::StatusOr<Dataset> a = LoadDataset(options);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->classes, (std::vector<std::string>{"CricketShot", "Punch"}));
  ASSERT_EQ(a->clips.size(), 20u);  // the README is not a video
  std::map<std::pair<int64_t, Split>, int> counts;
  for (const Clip& clip : a->clips) ++counts[{clip.label, clip.split}];
  for (int64_t label : {0, 1}) {
    EXPECT_EQ((counts[{label, Split::kTest}]), 3);        // round(10 * 0.25)
    EXPECT_EQ((counts[{label, Split::kValidation}]), 1);  // round(7 * 0.15)
    EXPECT_EQ((counts[{label, Split::kTrain}]), 6);
  }
  absl::StatusOr<Dataset> again = LoadDataset(options);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(DatasetToJson(*again), DatasetToJson(*a));
  options.seed = 2;
  EXPECT_NE(DatasetToJson(*LoadDataset(options)), DatasetToJson(*a));
  absl::StatusOr<Dataset> read = DatasetFromJson(DatasetToJson(*a));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(DatasetToJson(*read), DatasetToJson(*a));
}

TEST_F(DatasetTest, Ucf101ListsDecideTheSplit) {
  fs::create_directories(root_ / "lists");
  std::ofstream(root_ / "lists" / "classInd.txt") << "1 Punch\n2 CricketShot\n";
  std::ofstream(root_ / "lists" / "trainlist01.txt")
      << "Punch/v_Punch_g02_c01.avi 1\nPunch/v_Punch_g03_c02.avi 1\nPunch/v_Punch_g01_c03.avi 1\n"
      << "CricketShot\\v_CricketShot_g02_c01.avi 2\nCricketShot/v_CricketShot_g03_c02.avi 2\n";
  std::ofstream(root_ / "lists" / "testlist01.txt")
      << "Punch/v_Punch_g02_c04.avi\nCricketShot/v_CricketShot_g02_c04.avi\n";
  DatasetOptions options;
  options.root = (root_ / "videos").string();
  options.train_list = (root_ / "lists" / "trainlist01.txt").string();
  options.test_list = (root_ / "lists" / "testlist01.txt").string();
  options.class_index = (root_ / "lists" / "classInd.txt").string();
  absl::StatusOr<Dataset> dataset = LoadDataset(options);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_EQ(dataset->classes, (std::vector<std::string>{"Punch", "CricketShot"}));
  EXPECT_EQ(dataset->clips.size(), 7u);  // only listed videos
  EXPECT_EQ(dataset->ClipsOf(Split::kTest).size(), 2u);
  EXPECT_EQ(dataset->ClipsOf(Split::kValidation).size(), 2u);  // one per class, from train
  EXPECT_EQ(dataset->ClipsOf(Split::kTest)[0].path, "Punch/v_Punch_g02_c04.avi");
  EXPECT_EQ(dataset->ClipsOf(Split::kTest)[0].label, 0);

  std::ofstream(root_ / "lists" / "testlist01.txt") << "\nPunch/v_Punch_g09_c09.avi\n";
  absl::StatusOr<Dataset> missing = LoadDataset(options);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("testlist01.txt:2: Punch/v_Punch_g09_c09.avi is not a video"));
}

TEST_F(DatasetTest, ErrorsNameWhatIsWrong) {
  DatasetOptions options;
  options.root = (root_ / "nowhere").string();
  EXPECT_THAT(std::string(LoadDataset(options).status().message()), HasSubstr("not a directory"));
  options.root = (root_ / "videos").string();
  options.train_list = "train.txt";
  EXPECT_THAT(std::string(LoadDataset(options).status().message()), HasSubstr("or neither"));
  options.train_list.clear();
  fs::remove_all(root_ / "videos" / "Punch");
  EXPECT_THAT(std::string(LoadDataset(options).status().message()),
              HasSubstr("at least two class directories"));
  fs::create_directories(root_ / "videos" / "Empty");
  EXPECT_THAT(std::string(LoadDataset(options).status().message()),
              HasSubstr("class Empty has no videos"));
}

}  // namespace
}  // namespace vidclf::train
