#include "tests/test_util/test_models.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/video_model.h"

namespace vidclf::testing {

model::ModelConfig TinyConfig() {
  model::ModelConfig config;
  config.name = "tiny";
  config.version = "1";
  config.labels = {"alpha", "beta", "gamma"};
  config.input.num_frames = 4;
  config.input.resize_shorter_side = 64;
  config.input.crop_size = 64;
  return config;
}

model::ModelConfig TinyTransformerConfig(const std::string& name, const std::string& attention) {
  model::ModelConfig config = TinyConfig();
  config.name = name;
  config.head = model::HeadType::kTransformer;
  config.transformer.d_model = 32;
  config.transformer.num_heads = 2;
  config.transformer.num_layers = 1;
  config.transformer.ffn_size = 64;
  config.transformer.attention.type = attention;
  return config;
}

void SaveModel(const model::ModelConfig& config, const std::string& bundle_dir, int seed) {
  torch::manual_seed(seed);
  auto model = model::VideoModel::Create(config);
  ASSERT_TRUE(model.ok()) << model.status();
  const absl::Status saved = (*model)->Save(bundle_dir);
  ASSERT_TRUE(saved.ok()) << saved;
}

}  // namespace vidclf::testing
