// A mechanism that lives only in this file, registered at run time, is trained, saved, served by a
// real server on a loopback port and substituted into a softmax model, with no other file aware
// of it: what a 9th mechanism needs besides its own file.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>

#include "model/attention/registry.h"
#include "model/train/head_trainer.h"
#include "model/video_model.h"
#include "server/server.h"
#include "tests/test_util/test_files.h"
#include "tests/test_util/test_models.h"
#include "vidclf/v1/video_classifier.grpc.pb.h"

namespace vidclf {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

constexpr model::attention::AttentionParameter kScale{"uniform_test_scale", 1,
                                                      "multiplies the output"};
std::atomic<int> forward_calls{0};
std::atomic<int64_t> scale_seen{0};

// Every real key weighs the same: the output is the mean of the real values, times the scale.
class UniformAttention : public model::attention::AttentionMechanism {
 public:
  explicit UniformAttention(const model::attention::AttentionOptions& options)
      : scale_(kScale.Of(options)) {
    TORCH_CHECK(scale_ >= 1, "uniform-test attention needs uniform_test_scale >= 1; got ", scale_);
  }

  torch::Tensor forward(const torch::Tensor& queries, const torch::Tensor& keys,
                        const torch::Tensor& values,
                        const torch::Tensor& key_padding_mask) override {
    model::attention::CheckAttentionInputs(queries, keys, values, key_padding_mask);
    ++forward_calls;
    scale_seen = scale_;
    const torch::Tensor weights = key_padding_mask.defined()
                                      ? key_padding_mask.to(values.dtype())
                                      : torch::ones({keys.size(0), keys.size(2)}, values.options());
    const torch::Tensor mean = (values * weights.view({weights.size(0), 1, -1, 1})).sum(2) /
                               weights.sum(1).clamp_min(1).view({-1, 1, 1});
    return (mean * static_cast<double>(scale_))
        .unsqueeze(2)
        .expand({queries.size(0), queries.size(1), queries.size(2), values.size(3)});
  }

 private:
  int64_t scale_;
};

model::attention::AttentionSpec UniformSpec() {
  model::attention::AttentionSpec spec;
  spec.name = "uniform-test";
  spec.summary = "the mean of the real values";
  spec.parameters = {kScale};
  spec.flops_per_head = [](double n, double e, const model::attention::AttentionOptions&) {
    return 2 * n * e;
  };
  spec.make = &model::attention::Construct<UniformAttention>;
  return spec;
}

class AttentionPluginTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(model::attention::RegisterAttention(UniformSpec()).ok());
    dir_ = new std::string(testing::MakeScratchDir("attention-plugin"));
    testing::MakeVideo("-f lavfi -i testsrc2=size=96x72:rate=10 -frames:v 12 -c:v libx264",
                       *dir_ + "/clip.mp4");
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }

  static grpc::Status Classify(int port, const std::string& model, const std::string& attention,
                               v1::ClassifyResponse* response) {
    v1::ClassifyRequest request;
    request.set_video(testing::ReadFile(*dir_ + "/clip.mp4"));
    request.set_model(model);
    request.set_attention(attention);
    auto stub = v1::VideoClassifier::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return stub->Classify(&context, request, response);
  }

  static std::string* dir_;
};

std::string* AttentionPluginTest::dir_ = nullptr;

// Three classes of embedding sequences that differ in their mean, which uniform attention keeps.
model::EmbeddingSet SeparableSet(int per_class) {
  torch::manual_seed(3);
  const torch::Tensor embeddings = torch::randn({3 * per_class, 4, 512});
  const torch::Tensor labels = torch::arange(3 * per_class) % 3;
  for (int64_t i = 0; i < labels.size(0); ++i) {
    embeddings[i].narrow(1, labels[i].item<int64_t>() * 8, 8).add_(3.0);
  }
  return {embeddings, torch::full({3 * per_class}, 4, torch::kLong), labels, {}};
}

TEST_F(AttentionPluginTest, IsTrainedServedAndSubstituted) {
  // Trained: a transformer head on it learns the three classes.
  model::ModelConfig config = testing::TinyTransformerConfig("uniform", "uniform-test");
  config.transformer.attention.parameters[kScale.key] = 2;
  absl::StatusOr<std::unique_ptr<model::VideoModel>> trained = model::VideoModel::Create(config);
  ASSERT_TRUE(trained.ok()) << trained.status();
  model::HeadTrainingOptions training;
  training.epochs = 30;
  training.batch_size = 8;
  const model::EmbeddingSet set = SeparableSet(8);
  const int calls_before_training = forward_calls;
  const absl::StatusOr<model::TrainingReport> report =
      model::TrainHead((*trained)->head(), set, {}, training, nullptr);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_GT(forward_calls, calls_before_training);
  EXPECT_GE(model::Accuracy((*trained)->head(), set), 0.9);
  ASSERT_TRUE((*trained)->Save(*dir_ + "/repo/uniform/1").ok());

  // A softmax model whose bundle allows it.
  model::ModelConfig softmax = testing::TinyTransformerConfig("softmax", "softmax");
  softmax.transformer.attention_substitutions = {"uniform-test"};
  testing::SaveModel(softmax, *dir_ + "/repo/softmax/1");

  // Served: its parameter read back from model.json, the calls answered.
  ServerOptions options;
  options.model_repository = *dir_ + "/repo";
  options.default_model = "uniform";
  options.grpc_port = 0;
  options.metrics.port = 0;
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->grpc_port();

  scale_seen = 0;
  int calls = forward_calls;
  v1::ClassifyResponse response;
  grpc::Status status = Classify(port, "uniform", "", &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.top_k_size(), 3);
  EXPECT_GT(forward_calls, calls);
  EXPECT_EQ(scale_seen, 2);

  // Substituted into the softmax model, which itself runs without it.
  calls = forward_calls;
  status = Classify(port, "softmax", "", &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(forward_calls, calls);
  status = Classify(port, "softmax", "uniform-test", &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.top_k_size(), 3);
  EXPECT_GT(forward_calls, calls);
  EXPECT_EQ(scale_seen, 1);

  // Refused where the bundle does not allow it, and the server keeps serving.
  status = Classify(port, "uniform", "softmax", &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("its bundle allows no substitution"));
  EXPECT_TRUE(Classify(port, "uniform", "uniform-test", &response).ok());
  (*server)->Drain();
}

TEST_F(AttentionPluginTest, ItsParameterIsCheckedLikeABuiltInOne) {
  model::ModelConfig config = testing::TinyTransformerConfig("uniform", "uniform-test");
  config.transformer.attention.parameters[kScale.key] = 0;
  const absl::Status status = model::ValidateModelConfig(config);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("uniform_test_scale >= 1"));
  EXPECT_THAT(model::attention::AttentionNames(), Contains("uniform-test"));
}

}  // namespace
}  // namespace vidclf
