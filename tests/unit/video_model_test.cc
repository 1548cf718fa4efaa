#include "model/video_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace vidclf::model {
namespace {

using ::testing::HasSubstr;

class VideoModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("vidclf_model_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    config_.name = "tiny";
    config_.version = "3";
    config_.labels = {"a", "b", "c"};
    config_.input.num_frames = 4;
    config_.input.resize_shorter_side = 40;
    config_.input.crop_size = 32;
    config_.provenance = {{"seed", 1}};
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
  ModelConfig config_;
};

TEST_F(VideoModelTest, SavedBundleLoadsBitExactly) {
  torch::manual_seed(11);
  auto model = VideoModel::Create(config_);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE((*model)->Save(dir_.string()).ok());
  auto loaded = VideoModel::Load(dir_.string());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->config().labels, config_.labels);
  EXPECT_EQ((*loaded)->config().input.crop_size, 32);
  EXPECT_EQ((*loaded)->config().provenance["seed"], 1);

  auto saved_state = (*model)->backbone()->named_parameters();
  for (const auto& item : (*loaded)->backbone()->named_parameters()) {
    EXPECT_TRUE(torch::equal(item.value(), saved_state[item.key()])) << item.key();
  }
  const torch::Tensor frames = torch::randn({4, 3, 32, 32});
  auto a = (*model)->Embed(frames);
  auto b = (*loaded)->Embed(frames);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(torch::equal(*a, *b));
  auto probabilities = (*loaded)->Classify(b->unsqueeze(0), torch::tensor({4}, torch::kLong));
  ASSERT_TRUE(probabilities.ok()) << probabilities.status();
  EXPECT_EQ(probabilities->sizes(), (std::vector<int64_t>{1, 3}));
  EXPECT_NEAR(probabilities->sum().item<float>(), 1.0f, 1e-6);
}

TEST_F(VideoModelTest, EmbeddingInChunksEqualsOneBatch) {
  torch::manual_seed(5);
  auto model = VideoModel::Create(config_);
  ASSERT_TRUE(model.ok());
  const torch::Tensor frames = torch::randn({7, 3, 32, 32});
  auto whole = (*model)->Embed(frames, /*max_batch_frames=*/7);
  auto chunked = (*model)->Embed(frames, /*max_batch_frames=*/3);
  ASSERT_TRUE(whole.ok() && chunked.ok());
  EXPECT_EQ(whole->sizes(), (std::vector<int64_t>{7, 512}));
  EXPECT_TRUE(torch::allclose(*whole, *chunked, 1e-4, 1e-5));
}

TEST_F(VideoModelTest, LoadNamesWhatIsMissingOrWrong) {
  auto missing = VideoModel::Load((dir_ / "nothing").string());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("model.json"));

  std::filesystem::create_directories(dir_);
  std::ofstream(dir_ / "model.json") << R"({"name": "x", "version": "1", "labels": ["a"],
      "input": {}, "head": {"type": "lstm"}})";
  auto bad_head = VideoModel::Load(dir_.string());
  EXPECT_EQ(bad_head.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_head.status().message(), HasSubstr("unknown head type \"lstm\""));

  std::ofstream(dir_ / "model.json") << "{not json";
  EXPECT_THAT(VideoModel::Load(dir_.string()).status().message(), HasSubstr("not valid JSON"));
}

TEST_F(VideoModelTest, LoadRefusesWeightsOfAnotherShape) {
  auto model = VideoModel::Create(config_);
  ASSERT_TRUE(model.ok());
  ASSERT_TRUE((*model)->Save(dir_.string()).ok());
  config_.labels.push_back("d");  // the saved head has 3 outputs, the config now asks for 4
  std::ofstream(dir_ / "model.json") << ModelConfigToJson(config_).dump();
  auto loaded = VideoModel::Load(dir_.string());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(loaded.status().message(), HasSubstr("cannot load the weights"));
}

}  // namespace
}  // namespace vidclf::model
