#include "model/resnet18.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace vidclf::model {
namespace {

std::set<std::string> Keys(const torch::OrderedDict<std::string, torch::Tensor>& dict) {
  std::set<std::string> keys;
  for (const auto& item : dict) keys.insert(item.key());
  return keys;
}

// torchvision.models.resnet18().state_dict() keys, written out from its architecture: the stem,
// four stages of two BasicBlocks, downsample projections on the first block of stages 2-4, fc.
std::set<std::string> TorchvisionStateDictKeys() {
  std::set<std::string> keys = {"conv1.weight", "fc.weight", "fc.bias"};
  auto add_norm = [&keys](const std::string& prefix) {
    for (const char* suffix :
         {"weight", "bias", "running_mean", "running_var", "num_batches_tracked"}) {
      keys.insert(prefix + "." + suffix);
    }
  };
  add_norm("bn1");
  for (int stage = 1; stage <= 4; ++stage) {
    for (int block = 0; block < 2; ++block) {
      const std::string prefix = "layer" + std::to_string(stage) + "." + std::to_string(block);
      keys.insert(prefix + ".conv1.weight");
      keys.insert(prefix + ".conv2.weight");
      add_norm(prefix + ".bn1");
      add_norm(prefix + ".bn2");
      if (stage > 1 && block == 0) {
        keys.insert(prefix + ".downsample.0.weight");
        add_norm(prefix + ".downsample.1");
      }
    }
  }
  return keys;
}

TEST(ResNet18, HasTorchvisionsParameterAndBufferNames) {
  ResNet18 net;
  std::set<std::string> ours = Keys(net->named_parameters());
  const std::set<std::string> buffers = Keys(net->named_buffers());
  ours.insert(buffers.begin(), buffers.end());
  EXPECT_EQ(ours, TorchvisionStateDictKeys());
  EXPECT_EQ(ours.size(), 122u);
  EXPECT_TRUE(ours.count("layer1.0.bn1.running_mean"));
  EXPECT_TRUE(ours.count("layer2.0.downsample.0.weight"));
}

TEST(ResNet18, HasTorchvisionsParameterCount) {
  ResNet18 net;
  int64_t count = 0;
  for (const torch::Tensor& p : net->parameters()) count += p.numel();
  EXPECT_EQ(count, 11689512);  // torchvision's resnet18, fc included
}

TEST(ResNet18, EmbedsEachFrameInto512Features) {
  torch::manual_seed(0);
  ResNet18 net;
  net->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor frames = torch::randn({5, 3, 64, 64});
  const torch::Tensor embeddings = net->forward(frames);
  EXPECT_EQ(embeddings.sizes(), (std::vector<int64_t>{5, 512}));
  EXPECT_TRUE(torch::isfinite(embeddings).all().item<bool>());
  // Frames are embedded independently: a frame alone gives the row it got in the batch.
  EXPECT_TRUE(
      torch::allclose(net->forward(frames.slice(0, 2, 3)), embeddings.slice(0, 2, 3), 1e-4, 1e-5));
}

TEST(ResNet18, SeededInitialisationIsReproducible) {
  torch::manual_seed(42);
  ResNet18 a;
  torch::manual_seed(42);
  ResNet18 b;
  EXPECT_TRUE(torch::equal(a->layer3[0]->as<BasicBlock>()->conv1->weight,
                           b->layer3[0]->as<BasicBlock>()->conv1->weight));
}

TEST(ResNet18, RejectsFramesWithoutThreeChannels) {
  ResNet18 net;
  EXPECT_THROW(net->forward(torch::zeros({2, 1, 32, 32})), c10::Error);
}

}  // namespace
}  // namespace vidclf::model
