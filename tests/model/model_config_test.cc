// model.json is strict and checked once: unknown keys, wrong types and bad names are errors that
// name what is wrong, and the same validation guards Create, Save and Load.
#include "model/model_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "model/video_model.h"

namespace vidclf::model {
namespace {

using ::testing::HasSubstr;

ModelConfig Small(HeadType head) {
  ModelConfig config;
  config.name = "m";
  config.version = "1";
  config.labels = {"a", "b"};
  config.input.num_frames = 4;
  config.input.resize_shorter_side = 64;
  config.input.crop_size = 64;
  config.head = head;
  config.transformer.d_model = 16;
  config.transformer.num_heads = 2;
  config.transformer.num_layers = 1;
  config.transformer.ffn_size = 16;
  return config;
}

std::string ErrorOf(const nlohmann::json& json) {
  absl::StatusOr<ModelConfig> config = ModelConfigFromJson(json);
  EXPECT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(config.status().message());
}

TEST(ModelConfigTest, EveryHeadRoundTrips) {
  for (const HeadType head : {HeadType::kGru, HeadType::kTransformer, HeadType::kBagOfFrames}) {
    ModelConfig config = Small(head);
    config.transformer.pooling = Pooling::kCls;
    config.transformer.positional_encoding = false;
    config.transformer.attention_substitutions = {"clustered"};
    config.metrics = {{"accuracy", 0.5}};
    config.gru.input_dropout = 0.25;
    const nlohmann::json json = ModelConfigToJson(config);
    absl::StatusOr<ModelConfig> read = ModelConfigFromJson(json);
    ASSERT_TRUE(read.ok()) << HeadTypeName(head) << ": " << read.status();
    EXPECT_EQ(ModelConfigToJson(*read), json) << HeadTypeName(head);
  }
}

TEST(ModelConfigTest, UnknownKeysAreNamedWithTheirPath) {
  nlohmann::json json = ModelConfigToJson(Small(HeadType::kGru));
  json["head"]["hiden_size"] = 8;
  EXPECT_THAT(ErrorOf(json), HasSubstr("unknown key \"head.hiden_size\""));

  json = ModelConfigToJson(Small(HeadType::kTransformer));
  json["head"]["attention"]["cluster"] = 3;
  EXPECT_THAT(ErrorOf(json), HasSubstr("unknown key \"head.attention.cluster\""));

  json = ModelConfigToJson(Small(HeadType::kGru));
  json["inputs"] = nlohmann::json::object();
  EXPECT_THAT(ErrorOf(json), HasSubstr("unknown key \"inputs\""));

  // A transformer's option on a GRU head is a mistake, not something to ignore.
  json = ModelConfigToJson(Small(HeadType::kGru));
  json["head"]["d_model"] = 64;
  EXPECT_THAT(ErrorOf(json), HasSubstr("unknown key \"head.d_model\""));
}

TEST(ModelConfigTest, WrongTypesAndNamesAreNamed) {
  nlohmann::json json = ModelConfigToJson(Small(HeadType::kGru));
  json["input"]["num_frames"] = "sixteen";
  EXPECT_THAT(ErrorOf(json), HasSubstr("input.num_frames"));

  json = ModelConfigToJson(Small(HeadType::kGru));
  json["head"]["type"] = "Transformer";
  EXPECT_THAT(ErrorOf(json), HasSubstr("head.type: unknown head type \"Transformer\""));

  json = ModelConfigToJson(Small(HeadType::kTransformer));
  json["head"]["pooling"] = "max";
  EXPECT_THAT(ErrorOf(json), HasSubstr("head.pooling: unknown pooling \"max\""));

  json = ModelConfigToJson(Small(HeadType::kTransformer));
  json["head"]["attention"]["type"] = "performer";
  EXPECT_THAT(ErrorOf(json), HasSubstr("head.attention.type: unknown attention type"));

  json = ModelConfigToJson(Small(HeadType::kGru));
  json.erase("labels");
  EXPECT_THAT(ErrorOf(json), HasSubstr("labels is required"));
}

TEST(ModelConfigTest, OneValidationGuardsCreateSaveAndLoad) {
  ModelConfig bad = Small(HeadType::kTransformer);
  bad.transformer.num_heads = 3;  // does not divide d_model 16
  EXPECT_THAT(std::string(ValidateModelConfig(bad).message()), HasSubstr("head.num_heads"));
  EXPECT_THAT(std::string(VideoModel::Create(bad).status().message()), HasSubstr("head.num_heads"));
  EXPECT_THAT(ErrorOf(ModelConfigToJson(bad)), HasSubstr("head.num_heads"));

  bad = Small(HeadType::kGru);
  bad.gru.input_dropout = 1;
  EXPECT_THAT(ErrorOf(ModelConfigToJson(bad)), HasSubstr("head.input_dropout must be in [0, 1)"));
  // Bundles written before the key existed still load, without dropout.
  nlohmann::json older = ModelConfigToJson(Small(HeadType::kGru));
  older["head"].erase("input_dropout");
  absl::StatusOr<ModelConfig> read = ModelConfigFromJson(older);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->gru.input_dropout, 0);

  bad = Small(HeadType::kGru);
  bad.labels = {"a", "a"};
  EXPECT_THAT(std::string(ValidateModelConfig(bad).message()), HasSubstr("\"a\" appears twice"));
  bad.labels = {"a", "b"};
  bad.name = "../escape";
  EXPECT_THAT(std::string(ValidateModelConfig(bad).message()), HasSubstr("free of slashes"));

  // A configuration made invalid after Create is refused by Save, so Load never meets it.
  absl::StatusOr<std::unique_ptr<VideoModel>> model = VideoModel::Create(Small(HeadType::kGru));
  ASSERT_TRUE(model.ok()) << model.status();
  (*model)->mutable_config().labels.clear();
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "model_config_test_bundle";
  EXPECT_THAT(std::string((*model)->Save(dir.string()).message()), HasSubstr("labels"));
  EXPECT_FALSE(std::filesystem::exists(dir / "model.json"));
}

// A segmentation model says so, with the rate it was trained at; a classification model writes no
// key, so that bundles written before segmentation models existed read as what they are.
TEST(ModelConfigTest, SegmentationIsOptionalStrictAndBounded) {
  ModelConfig config = Small(HeadType::kGru);
  EXPECT_FALSE(ModelConfigToJson(config).contains("segmentation"));
  config.segmentation = SegmentationConfig{2.5};
  const nlohmann::json json = ModelConfigToJson(config);
  absl::StatusOr<ModelConfig> read = ModelConfigFromJson(json);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_TRUE(read->segmentation.has_value());
  EXPECT_EQ(read->segmentation->frames_per_second, 2.5);

  nlohmann::json bad = json;
  bad["segmentation"]["fps"] = 4;
  EXPECT_THAT(ErrorOf(bad), HasSubstr("unknown key \"segmentation.fps\""));
  bad = json;
  bad["segmentation"].erase("frames_per_second");
  EXPECT_THAT(ErrorOf(bad), HasSubstr("segmentation.frames_per_second is required"));
  for (const double rate : {0.0, -1.0, 1001.0}) {
    bad["segmentation"]["frames_per_second"] = rate;
    EXPECT_THAT(ErrorOf(bad), HasSubstr("segmentation.frames_per_second must be in (0, 1000]"))
        << rate;
  }
}

}  // namespace
}  // namespace vidclf::model
