#include "model/video_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "model/onednn_resnet18.h"

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
  auto loaded = VideoModel::Load(dir_.string(), InferenceOptions::Exact());
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
  auto bad_head = VideoModel::Load(dir_.string(), InferenceOptions::Exact());
  EXPECT_EQ(bad_head.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_head.status().message(), HasSubstr("unknown head type \"lstm\""));

  std::ofstream(dir_ / "model.json") << "{not json";
  EXPECT_THAT(VideoModel::Load(dir_.string(), InferenceOptions::Exact()).status().message(),
              HasSubstr("not valid JSON"));
}

TEST_F(VideoModelTest, LoadRefusesWeightsOfAnotherShape) {
  auto model = VideoModel::Create(config_);
  ASSERT_TRUE(model.ok());
  ASSERT_TRUE((*model)->Save(dir_.string()).ok());
  config_.labels.push_back("d");  // the saved head has 3 outputs, the config now asks for 4
  std::ofstream(dir_ / "model.json") << ModelConfigToJson(config_).dump();
  auto loaded = VideoModel::Load(dir_.string(), InferenceOptions::Exact());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(loaded.status().message(), HasSubstr("cannot load the weights"));
}

// A softmax-trained transformer whose bundle allows the clustered mechanisms in its place.
ModelConfig TransformerConfig(ModelConfig config) {
  config.head = HeadType::kTransformer;
  config.transformer.d_model = 16;
  config.transformer.num_heads = 2;
  config.transformer.num_layers = 2;
  config.transformer.ffn_size = 32;
  config.transformer.attention.type = "softmax";
  // Four frames never fill more than four clusters, so clustered attention is exact here, and
  // top-k = 4 keys keeps improved-clustered exact too.
  config.transformer.attention.parameters["clusters"] = 8;
  config.transformer.attention.parameters["topk"] = 4;
  config.transformer.attention_substitutions = {"clustered", "improved-clustered"};
  return config;
}

TEST_F(VideoModelTest, SubstitutedAttentionSharesTheTrainedWeights) {
  torch::manual_seed(12);
  ASSERT_TRUE((*VideoModel::Create(TransformerConfig(config_)))->Save(dir_.string()).ok());
  auto model = VideoModel::Load(dir_.string(), InferenceOptions::Exact());
  ASSERT_TRUE(model.ok()) << model.status();
  const torch::Tensor embeddings = torch::randn({2, 4, 512});
  const torch::Tensor lengths = torch::tensor({4, 3}, torch::kLong);
  auto own = (*model)->Classify(embeddings, lengths);
  ASSERT_TRUE(own.ok()) << own.status();
  for (const char* attention : {"softmax", "clustered", "improved-clustered"}) {
    auto substituted = (*model)->Classify(embeddings, lengths, attention);
    ASSERT_TRUE(substituted.ok()) << substituted.status();
    EXPECT_TRUE(torch::allclose(*substituted, *own, 1e-5, 1e-6)) << attention;
  }
  // Fewer clusters than frames: an approximation, so the probabilities move, but not far.
  ModelConfig coarse = TransformerConfig(config_);
  coarse.transformer.attention.parameters["clusters"] = 2;
  std::ofstream(dir_ / "model.json") << ModelConfigToJson(coarse).dump();
  auto approximate = VideoModel::Load(dir_.string(), InferenceOptions::Exact());
  ASSERT_TRUE(approximate.ok()) << approximate.status();
  auto clustered = (*approximate)->Classify(embeddings, lengths, "clustered");
  ASSERT_TRUE(clustered.ok()) << clustered.status();
  EXPECT_FALSE(torch::equal(*clustered, *own));
  EXPECT_TRUE(torch::allclose(clustered->sum(1), torch::ones({2}), 1e-5, 1e-6));
}

TEST_F(VideoModelTest, RefusesAttentionTheBundleDoesNotAllow) {
  auto transformer = VideoModel::Create(TransformerConfig(config_));
  ASSERT_TRUE(transformer.ok()) << transformer.status();
  const torch::Tensor embeddings = torch::randn({1, 4, 512});
  const torch::Tensor lengths = torch::tensor({4}, torch::kLong);
  auto linear = (*transformer)->Classify(embeddings, lengths, "linear");
  EXPECT_EQ(linear.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(linear.status().message(),
              HasSubstr("cannot run with attention \"linear\"; its bundle allows clustered, "
                        "improved-clustered"));

  auto gru = VideoModel::Create(config_);
  ASSERT_TRUE(gru.ok());
  auto on_gru = (*gru)->Classify(embeddings, lengths, "clustered");
  EXPECT_EQ(on_gru.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(on_gru.status().message(), HasSubstr("gru head"));

  ModelConfig learned = TransformerConfig(config_);
  learned.transformer.attention_substitutions = {"linformer"};
  auto refused = ModelConfigFromJson(ModelConfigToJson(learned));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("learned weights"));
  EXPECT_FALSE(VideoModel::Create(learned).ok());
  nlohmann::json flash = ModelConfigToJson(TransformerConfig(config_));
  flash["head"]["attention_substitutions"] = {"flash"};
  EXPECT_THAT(ModelConfigFromJson(flash).status().message(),
              HasSubstr("head.attention_substitutions: unknown attention type \"flash\""));
}

TEST_F(VideoModelTest, ConfigKeepsStreamingAndSubstitutions) {
  ModelConfig config = TransformerConfig(config_);
  config.streaming = {/*window_frames=*/12, /*stride_frames=*/5};
  auto read = ModelConfigFromJson(ModelConfigToJson(config));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->streaming.window_frames, 12);
  EXPECT_EQ(read->streaming.stride_frames, 5);
  EXPECT_EQ(read->transformer.attention_substitutions, config.transformer.attention_substitutions);

  config.streaming.stride_frames = 13;
  EXPECT_THAT(ModelConfigFromJson(ModelConfigToJson(config)).status().message(),
              HasSubstr("stride_frames <= window_frames"));
  config.streaming = {/*window_frames=*/600, /*stride_frames=*/1};
  config.transformer.attention.type = "linformer";
  config.transformer.attention_substitutions.clear();
  EXPECT_THAT(ModelConfigFromJson(ModelConfigToJson(config)).status().message(),
              HasSubstr("does not fit linformer's max_length"));
}

TEST_F(VideoModelTest, StreamStepFollowsTheWholeSequence) {
  torch::manual_seed(13);
  auto model = VideoModel::Create(config_);  // GRU: recurrent
  ASSERT_TRUE(model.ok());
  const torch::Tensor embeddings = torch::randn({1, 6, 512});
  HeadState state;
  torch::Tensor probabilities;
  for (int64_t start = 0; start < 6; start += 2) {
    auto step = (*model)->StreamStep(embeddings.slice(1, start, start + 2), state);
    ASSERT_TRUE(step.ok()) << step.status();
    std::tie(probabilities, state) = *std::move(step);
  }
  auto whole = (*model)->Classify(embeddings, torch::tensor({6}, torch::kLong));
  ASSERT_TRUE(whole.ok());
  EXPECT_TRUE(torch::allclose(probabilities, *whole, 1e-5, 1e-6));
  auto wrong = (*model)->StreamStep(torch::randn({1, 2, 7}), state);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(VideoModelTest, StreamStepEachStepsStreamsAsEachAlone) {
  torch::manual_seed(15);
  auto model = VideoModel::Create(config_);
  ASSERT_TRUE(model.ok());
  auto started = (*model)->StreamStep(torch::randn({1, 3, 512}), {});
  ASSERT_TRUE(started.ok()) << started.status();
  const std::vector<HeadState> states = {started->second, {}};
  const torch::Tensor frames = torch::randn({2, 1, 512});
  auto together = (*model)->StreamStepEach(frames, states);
  ASSERT_TRUE(together.ok()) << together.status();
  ASSERT_EQ(together->second.size(), 2u);
  for (int64_t b = 0; b < 2; ++b) {
    auto alone = (*model)->StreamStep(frames.narrow(0, b, 1), states[b]);
    ASSERT_TRUE(alone.ok()) << alone.status();
    EXPECT_TRUE(torch::allclose(together->first.narrow(0, b, 1), alone->first, 1e-5, 1e-6));
    EXPECT_EQ(together->second[b].frames_seen, alone->second.frames_seen);
  }
  EXPECT_EQ((*model)->StreamStepEach(frames, {states[0]}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*model)->StreamStepEach(frames, states, "clustered").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The option reaches the head where it has a one-frame step (the causal-linear transformer), and
// the probabilities it steps to stay near the float32 ones; the GRU keeps float32.
TEST_F(VideoModelTest, Int8StepWeightsReachHeadsWithAOneFrameStep) {
  torch::manual_seed(16);
  InferenceOptions int8 = InferenceOptions::Exact();
  int8.step_weights = StepWeights::kInt8;
  EXPECT_FALSE((*VideoModel::Create(config_, int8))->int8_step_weights());  // the GRU
  ModelConfig causal = TransformerConfig(config_);
  causal.transformer.attention.type = "causal-linear";
  causal.transformer.attention_substitutions = {};
  ASSERT_TRUE((*VideoModel::Create(causal))->Save(dir_.string()).ok());
  auto exact = VideoModel::Load(dir_.string(), InferenceOptions::Exact());
  auto rounded = VideoModel::Load(dir_.string(), int8);
  ASSERT_TRUE(exact.ok() && rounded.ok());
  EXPECT_FALSE((*exact)->int8_step_weights());
  EXPECT_TRUE((*rounded)->int8_step_weights());
  HeadState exact_state, rounded_state;
  const torch::Tensor embeddings = torch::randn({1, 5, 512});
  for (int64_t t = 0; t < 5; ++t) {
    const torch::Tensor frame = embeddings.slice(1, t, t + 1);
    auto a = (*exact)->StreamStep(frame, exact_state);
    auto b = (*rounded)->StreamStep(frame, rounded_state);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_LT((a->first - b->first).abs().max().item<double>(), 0.02) << "frame " << t;
    exact_state = a->second;
    rounded_state = b->second;
  }
}

TEST(ResolveDevice, NamesTheDevicesThisProcessCanUse) {
  EXPECT_EQ(*ResolveDevice("cpu"), torch::Device(torch::kCPU));
  const torch::Device automatic = *ResolveDevice("auto");
  EXPECT_EQ(automatic.is_cuda(), torch::cuda::is_available());
  EXPECT_EQ(ResolveDevice("gpu").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveDevice("cuda:x").status().code(), absl::StatusCode::kInvalidArgument);
  auto far = ResolveDevice("cuda:99");
  EXPECT_EQ(far.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(far.status().message(), HasSubstr("cuda:99"));
}

TEST_F(VideoModelTest, LowPrecisionNeedsCuda) {
  InferenceOptions options = InferenceOptions::Exact();
  options.precision = Precision::kFp16;
  auto half_on_cpu = VideoModel::Create(config_, options);
  EXPECT_EQ(half_on_cpu.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(half_on_cpu.status().message(), HasSubstr("needs a CUDA device"));
  EXPECT_THAT(ParsePrecision("fp8").status().message(), HasSubstr("unknown precision \"fp8\""));
}

// bf16 on the CPU runs oneDNN's bf16 kernels where the CPU has the instructions, near fp32.
TEST_F(VideoModelTest, Bf16RunsOnACpuWithItsInstructions) {
  InferenceOptions options = InferenceOptions::Exact();
  options.precision = Precision::kBf16;
  options.backbone_kernels = BackboneKernels::kWinograd;
  torch::manual_seed(31);
  ASSERT_TRUE((*VideoModel::Create(config_))->Save(dir_.string()).ok());
  auto bf16 = VideoModel::Load(dir_.string(), options);
  if (!OneDnnResNet18::Bf16Available()) {
    EXPECT_EQ(bf16.status().code(), absl::StatusCode::kInvalidArgument);
    GTEST_SKIP() << "no bf16 instructions on this CPU: the refusal checked";
  }
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  auto exact = VideoModel::Load(dir_.string(), InferenceOptions::Exact());
  ASSERT_TRUE(exact.ok()) << exact.status();
  const torch::Tensor frames = torch::randn({5, 3, 64, 64});
  auto from_bf16 = (*bf16)->Embed(frames, /*max_batch_frames=*/2);
  auto expected = (*exact)->Embed(frames);
  ASSERT_TRUE(from_bf16.ok() && expected.ok()) << from_bf16.status() << expected.status();
  EXPECT_EQ(from_bf16->scalar_type(), torch::kFloat);
  EXPECT_LT(((*from_bf16 - *expected).norm() / expected->norm()).item<double>(), 2e-2);
}

// int8 loads only with the bundle's calibration, refusing without one with how to make it; the
// calibration round-trips through its file, and a damaged one is refused naming the field.
TEST_F(VideoModelTest, Int8RunsByTheBundlesCalibration) {
  InferenceOptions options;
  options.device = torch::Device(torch::kCPU);
  options.precision = Precision::kInt8;
  torch::manual_seed(32);
  auto made = VideoModel::Create(config_);
  ASSERT_TRUE(made.ok() && (*made)->Save(dir_.string()).ok());
  // A CPU without VNNI refuses int8 before asking for a calibration.
  const bool int8_runs = OneDnnResNet18::Int8Available();
  EXPECT_THAT(VideoModel::Create(config_, options).status().message(),
              HasSubstr(int8_runs ? "needs the activation ranges of a bundle's calibration"
                                  : "needs a CPU with VNNI instructions"));
  auto uncalibrated = VideoModel::Load(dir_.string(), options);
  if (int8_runs) {
    EXPECT_EQ(uncalibrated.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(uncalibrated.status().message(),
                HasSubstr("has no int8 calibration (backbone_int8.json): run `vidclf-train "
                          "calibrate --work WORK`"));
  } else {
    EXPECT_EQ(uncalibrated.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(uncalibrated.status().message(), HasSubstr("VNNI"));
  }

  const torch::Tensor frames = torch::randn({6, 3, 32, 32});
  absl::StatusOr<Int8Calibration> calibration =
      CalibrateInt8((*made)->backbone(), {torch::randn({16, 3, 32, 32})});
  ASSERT_TRUE(calibration.ok()) << calibration.status();
  ASSERT_TRUE(WriteInt8Calibration(*calibration, dir_.string()).ok());
  absl::StatusOr<Int8Calibration> read = ReadInt8Calibration(dir_.string());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->output_max, calibration->output_max);
  EXPECT_EQ(read->input_max, calibration->input_max);
  EXPECT_EQ(read->input_mean, calibration->input_mean);
  ASSERT_EQ(read->input_mean.size(), read->output_max.size());
  EXPECT_EQ(read->input_mean.front().size(), 3u) << "the frames' three channels";
  EXPECT_EQ(read->frames, 16);
  if (!int8_runs) {
    GTEST_SKIP() << "no VNNI instructions on this CPU: the refusals and the calibration's file "
                    "checked";
  }
  auto int8 = VideoModel::Load(dir_.string(), options);
  ASSERT_TRUE(int8.ok()) << int8.status();
  auto exact = VideoModel::Load(dir_.string(), InferenceOptions::Exact());
  auto from_int8 = (*int8)->Embed(frames, /*max_batch_frames=*/4);
  auto expected = (*exact)->Embed(frames);
  ASSERT_TRUE(from_int8.ok() && expected.ok()) << from_int8.status() << expected.status();
  EXPECT_LT(((*from_int8 - *expected).norm() / expected->norm()).item<double>(), 5e-2);
  auto whole = (*int8)->Embed(frames, /*max_batch_frames=*/6);
  EXPECT_TRUE(torch::equal(*whole, *from_int8)) << "batches of 4 and 2 against one of 6";

  nlohmann::json damaged = Int8CalibrationToJson(*calibration);
  damaged["output_max"][3] = -1;
  std::ofstream(dir_ / kInt8CalibrationFile) << damaged.dump();
  EXPECT_THAT(VideoModel::Load(dir_.string(), options).status().message(),
              HasSubstr("backbone_int8.json: output_max: an array of positive numbers"));
  damaged = Int8CalibrationToJson(*calibration);
  damaged["input_mean"][2][0] = "0.5";
  std::ofstream(dir_ / kInt8CalibrationFile) << damaged.dump();
  EXPECT_THAT(VideoModel::Load(dir_.string(), options).status().message(),
              HasSubstr("backbone_int8.json: input_mean: an array of arrays of finite numbers"));
  // The means are optional: without them the biases stay as they are.
  damaged.erase("input_mean");
  std::ofstream(dir_ / kInt8CalibrationFile) << damaged.dump();
  auto uncorrected = VideoModel::Load(dir_.string(), options);
  ASSERT_TRUE(uncorrected.ok()) << uncorrected.status();
  auto from_uncorrected = (*uncorrected)->Embed(frames);
  ASSERT_TRUE(from_uncorrected.ok()) << from_uncorrected.status();
  EXPECT_FALSE(torch::equal(*from_uncorrected, *whole));
  options.device = torch::Device(torch::kCUDA, 0);
  EXPECT_THAT(BackboneDtype(Precision::kInt8, *options.device).status().message(),
              HasSubstr("precision int8 runs on the CPU"));
}

TEST_F(VideoModelTest, ChannelsLastEmbedsLikeNchw) {
  torch::manual_seed(14);
  ASSERT_TRUE((*VideoModel::Create(config_))->Save(dir_.string()).ok());
  InferenceOptions options = InferenceOptions::Exact();
  options.channels_last = true;
  auto nhwc = VideoModel::Load(dir_.string(), options);
  auto nchw = VideoModel::Load(dir_.string(), InferenceOptions::Exact());
  ASSERT_TRUE(nhwc.ok() && nchw.ok());
  const torch::Tensor frames = torch::randn({3, 3, 32, 32});
  auto a = (*nhwc)->Embed(frames);
  auto b = (*nchw)->Embed(frames);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(torch::allclose(*a, *b, 1e-4, 1e-4)) << (*a - *b).abs().max();
  EXPECT_EQ((*nhwc)->Save(dir_.string()).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(VideoModelTest, FusedBackboneEmbedsLikeTheEagerOneAndIsReleased) {
  torch::manual_seed(22);
  ASSERT_TRUE((*VideoModel::Create(config_))->Save(dir_.string()).ok());
  InferenceOptions options = InferenceOptions::Exact();
  options.channels_last = true;
  options.backbone_kernels = BackboneKernels::kFused;
  auto fused = VideoModel::Load(dir_.string(), options);
  auto eager = VideoModel::Load(dir_.string(), InferenceOptions::Exact());
  ASSERT_TRUE(fused.ok() && eager.ok());
  EXPECT_TRUE((*fused)->fused_backbone());
  const torch::Tensor frames = torch::randn({5, 3, 32, 32});
  auto a = (*fused)->Embed(frames, /*max_batch_frames=*/2);
  auto b = (*eager)->Embed(frames);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_LT(((*a - *b).abs().max() / b->abs().max()).item<double>(), 1e-4);
  EXPECT_THROW((*fused)->backbone(), c10::Error);
  EXPECT_EQ((*fused)->Save(dir_.string()).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(VideoModelTest, FusedBackbonesOfTheSameWeightsAreShared) {
  torch::manual_seed(23);
  std::unique_ptr<VideoModel> model = *VideoModel::Create(config_);
  const std::filesystem::path first = dir_ / "first", second = dir_ / "second",
                              other = dir_ / "other";
  ASSERT_TRUE(model->Save(first.string()).ok());
  {
    torch::NoGradGuard no_grad;
    for (torch::Tensor& p : model->head().parameters()) p.add_(0.5);
  }
  ASSERT_TRUE(model->Save(second.string()).ok());
  {
    torch::NoGradGuard no_grad;
    model->backbone()->conv1->weight[0][0][0][0].add_(1e-3);
  }
  ASSERT_TRUE(model->Save(other.string()).ok());

  InferenceOptions fused = InferenceOptions::Exact();
  fused.backbone_kernels = BackboneKernels::kFused;
  InferenceOptions fused_nhwc = fused;
  fused_nhwc.channels_last = true;
  auto a = VideoModel::Load(first.string(), fused);
  auto b = VideoModel::Load(second.string(), fused);
  auto c = VideoModel::Load(other.string(), fused);
  auto a_nhwc = VideoModel::Load(first.string(), fused_nhwc);
  auto a_eager = VideoModel::Load(first.string(), InferenceOptions::Exact());
  auto b_eager = VideoModel::Load(second.string(), InferenceOptions::Exact());
  ASSERT_TRUE(a.ok() && b.ok() && c.ok() && a_nhwc.ok() && a_eager.ok() && b_eager.ok());
  // The heads differ, the backbone is one; a backbone one weight apart, another layout or the
  // eager module is not shared.
  EXPECT_EQ((*a)->backbone_key(), (*b)->backbone_key());
  EXPECT_NE((*a)->backbone_key(), (*c)->backbone_key());
  EXPECT_NE((*a)->backbone_key(), (*a_nhwc)->backbone_key());
  EXPECT_NE((*a_eager)->backbone_key(), (*b_eager)->backbone_key());
  // Winograd backbones hold only oneDNN's copy of the weights, and compare by it alike.
  if (OneDnnResNet18::WinogradAvailable()) {
    InferenceOptions winograd = fused;
    winograd.backbone_kernels = BackboneKernels::kWinograd;
    auto a_winograd = VideoModel::Load(first.string(), winograd);
    auto b_winograd = VideoModel::Load(second.string(), winograd);
    auto c_winograd = VideoModel::Load(other.string(), winograd);
    ASSERT_TRUE(a_winograd.ok() && b_winograd.ok() && c_winograd.ok());
    EXPECT_EQ((*a_winograd)->backbone_key(), (*b_winograd)->backbone_key());
    EXPECT_NE((*a_winograd)->backbone_key(), (*c_winograd)->backbone_key());
    EXPECT_NE((*a_winograd)->backbone_key(), (*a)->backbone_key());
  }
  const torch::Tensor frames = torch::randn({3, 3, 32, 32});
  auto from_a = (*a)->Embed(frames);
  auto from_c = (*c)->Embed(frames);
  ASSERT_TRUE(from_a.ok() && from_c.ok());
  EXPECT_FALSE(torch::equal(*from_a, *from_c));
  const torch::Tensor lengths = torch::full({1}, 3, torch::kLong);
  auto head_a = (*a)->Classify(from_a->unsqueeze(0), lengths);
  auto head_b = (*b)->Classify(from_a->unsqueeze(0), lengths);
  ASSERT_TRUE(head_a.ok() && head_b.ok());
  EXPECT_FALSE(torch::allclose(*head_a, *head_b));

  // A reload takes the live backbone, which outlives the models that loaded it first.
  const void* shared = (*a)->backbone_key();
  auto a_again = VideoModel::Load(first.string(), fused);
  ASSERT_TRUE(a_again.ok());
  EXPECT_EQ((*a_again)->backbone_key(), shared);
  a->reset();
  b->reset();
  EXPECT_EQ((*a_again)->backbone_key(), shared);
  auto from_a_again = (*a_again)->Embed(frames);
  ASSERT_TRUE(from_a_again.ok());
  EXPECT_TRUE(torch::equal(*from_a, *from_a_again));
}

// Runs only where LibTorch sees a CUDA GPU (a model-only build on a GPU machine); CI has none.
// Every backbone precision and kernel choice on the GPU must embed as the CPU does, to within
// its arithmetic's rounding (cuDNN runs fp32 convolutions in TF32 by default), and the fp32 heads
// must classify and stream alike.
TEST_F(VideoModelTest, GpuEmbedsClassifiesAndStreamsLikeTheCpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU is visible";
  config_.input.resize_shorter_side = 64;
  config_.input.crop_size = 64;
  const torch::Tensor frames = torch::randn({6, 3, 64, 64});
  for (const std::string head : {"gru", "transformer"}) {
    config_.head = *ParseHeadType(head);
    std::filesystem::remove_all(dir_);
    torch::manual_seed(23);
    ASSERT_TRUE((*VideoModel::Create(config_))->Save(dir_.string()).ok());
    auto cpu = VideoModel::Load(dir_.string(), InferenceOptions::Exact());
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    auto expected = (*cpu)->Embed(frames);
    ASSERT_TRUE(expected.ok()) << expected.status();
    for (const auto& [precision, tolerance] : std::vector<std::pair<Precision, double>>{
             {Precision::kFp32, 5e-3}, {Precision::kFp16, 2e-2}, {Precision::kBf16, 8e-2}}) {
      for (const bool fused : {false, true}) {
        InferenceOptions options = InferenceOptions::Exact();
        options.device = torch::Device(torch::kCUDA, 0);
        options.precision = precision;
        options.channels_last = true;
        options.backbone_kernels = fused ? BackboneKernels::kFused : BackboneKernels::kEager;
        auto gpu = VideoModel::Load(dir_.string(), options);
        ASSERT_TRUE(gpu.ok()) << gpu.status();
        auto embeddings = (*gpu)->Embed(frames, /*max_batch_frames=*/4);
        ASSERT_TRUE(embeddings.ok()) << embeddings.status();
        ASSERT_TRUE(embeddings->is_cuda()) << "embeddings stay on the GPU for the heads";
        const double error =
            ((embeddings->cpu() - *expected).norm() / expected->norm()).item<double>();
        std::cout << head << " " << PrecisionName(precision) << (fused ? " fused" : " eager")
                  << ": relative error of the embeddings " << error << "\n";
        EXPECT_LT(error, tolerance) << PrecisionName(precision) << (fused ? " fused" : " eager");
        // Frames in pinned memory take the asynchronous copy, and convert on the GPU.
        auto from_pinned = (*gpu)->Embed(frames.pin_memory(), /*max_batch_frames=*/4);
        ASSERT_TRUE(from_pinned.ok()) << from_pinned.status();
        EXPECT_TRUE(torch::allclose(*from_pinned, *embeddings, 1e-3, 1e-5));

        const torch::Tensor sequence = expected->unsqueeze(0);
        const torch::Tensor lengths = torch::tensor({6}, torch::kLong);
        auto on_gpu = (*gpu)->Classify(sequence, lengths);
        auto on_cpu = (*cpu)->Classify(sequence, lengths);
        ASSERT_TRUE(on_gpu.ok() && on_cpu.ok()) << on_gpu.status() << on_cpu.status();
        EXPECT_TRUE(torch::allclose(*on_gpu, *on_cpu, 1e-3, 1e-4)) << *on_gpu << *on_cpu;
        auto step_gpu = (*gpu)->StreamStep(sequence, {});
        auto step_cpu = (*cpu)->StreamStep(sequence, {});
        ASSERT_TRUE(step_gpu.ok() && step_cpu.ok()) << step_gpu.status() << step_cpu.status();
        EXPECT_TRUE(torch::allclose(step_gpu->first, step_cpu->first, 1e-3, 1e-4));
      }
    }
  }
}

}  // namespace
}  // namespace vidclf::model
