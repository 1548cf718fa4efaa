// The captured streaming step (model/heads/step_graph.h) against the eager one. Runs only where
// LibTorch has CUDA and sees a GPU (a model-only build on a GPU machine); CI has neither.
#include "model/heads/step_graph.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "model/heads/transformer_head.h"
#include "model/video_model.h"

namespace vidclf::model {
namespace {

#ifdef VIDCLF_TORCH_CUDA

TransformerHead CausalLinearHeadOnGpu() {
  attention::AttentionOptions attention;
  attention.type = "causal-linear";
  torch::manual_seed(5);
  TransformerHead head(TransformerHeadOptions(/*num_classes=*/4)
                           .input_size(24)
                           .d_model(32)
                           .num_heads(4)
                           .num_layers(3)
                           .ffn_size(64)
                           .attention(attention));
  // Standardisation is part of the captured step: give it something to do.
  head->embedding_mean.copy_(torch::randn({24}));
  head->embedding_std.copy_(torch::rand({24}) + 0.5);
  head->to(torch::kCUDA);
  head->eval();
  return head;
}

void ExpectSameState(const HeadState& actual, const HeadState& expected) {
  EXPECT_EQ(actual.frames_seen, expected.frames_seen);
  ASSERT_EQ(actual.tensors.size(), expected.tensors.size());
  for (size_t i = 0; i < actual.tensors.size(); ++i) {
    EXPECT_TRUE(torch::allclose(actual.tensors[i], expected.tensors[i], 1e-4, 1e-5))
        << "tensor " << i;
  }
}

TEST(TransformerStepGraph, ReplaysTheEagerStepAndContinuesEitherOnesState) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU is visible";
  TransformerHead head = CausalLinearHeadOnGpu();
  TransformerStepGraph graph(*head, /*batch=*/1);
  torch::InferenceMode inference;
  const torch::Tensor frames = torch::randn({1, 20, 24}, torch::kCUDA);
  HeadState eager, captured;
  torch::Tensor last_logits;
  int64_t begin = 0;
  for (const int64_t chunk : {1, 3, 1, 7, 8}) {
    const torch::Tensor next = frames.slice(1, begin, begin + chunk);
    begin += chunk;
    auto [eager_logits, eager_next] = head->step(next, eager);
    auto [captured_logits, captured_next] = graph.Step(next, captured);
    EXPECT_TRUE(torch::allclose(captured_logits, eager_logits, 1e-4, 1e-5))
        << "after " << begin << " frames: " << captured_logits << eager_logits;
    ExpectSameState(captured_next, eager_next);
    last_logits = captured_logits;
    // Alternate whose state goes on, so that each continues the other's.
    eager = (begin % 2 == 0) ? captured_next : eager_next;
    captured = (begin % 2 == 0) ? eager_next : captured_next;
  }
  // Stepping is exact: the last logits are those of the whole sequence at once.
  const torch::Tensor whole = head->forward(frames, torch::tensor({20}, torch::kLong));
  EXPECT_TRUE(torch::allclose(last_logits, whole, 1e-4, 1e-5)) << last_logits << whole;
}

TEST(TransformerStepGraph, KeepsInterleavedStreamsApart) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU is visible";
  TransformerHead head = CausalLinearHeadOnGpu();
  TransformerStepGraph graph(*head, /*batch=*/1);
  torch::InferenceMode inference;
  const torch::Tensor a = torch::randn({1, 12, 24}, torch::kCUDA);
  const torch::Tensor b = torch::randn({1, 12, 24}, torch::kCUDA);
  HeadState state_a, state_b;
  torch::Tensor logits_a, logits_b;
  for (int64_t t = 0; t < 12; ++t) {
    std::tie(logits_a, state_a) = graph.Step(a.slice(1, t, t + 1), state_a);
    std::tie(logits_b, state_b) = graph.Step(b.slice(1, t, t + 1), state_b);
  }
  const torch::Tensor lengths = torch::tensor({12}, torch::kLong);
  EXPECT_TRUE(torch::allclose(logits_a, head->forward(a, lengths), 1e-4, 1e-5));
  EXPECT_TRUE(torch::allclose(logits_b, head->forward(b, lengths), 1e-4, 1e-5));
}

TEST(TransformerStepGraph, RefusesWhatDoesNotFit) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU is visible";
  TransformerHead head = CausalLinearHeadOnGpu();
  TransformerStepGraph graph(*head, /*batch=*/1);
  torch::InferenceMode inference;
  EXPECT_THROW(graph.Step(torch::randn({2, 1, 24}, torch::kCUDA), {}), c10::Error);
  EXPECT_THROW(graph.Step(torch::randn({1, 0, 24}, torch::kCUDA), {}), c10::Error);
  EXPECT_THROW(graph.Step(torch::randn({1, 1, 23}, torch::kCUDA), {}), c10::Error);
  HeadState state = graph.Step(torch::randn({1, 1, 24}, torch::kCUDA), {}).second;
  state.tensors.pop_back();
  EXPECT_THROW(graph.Step(torch::randn({1, 1, 24}, torch::kCUDA), state), c10::Error);
  // A head without a recurrent step, or on the CPU, cannot be captured.
  attention::AttentionOptions softmax;
  TransformerHead other(
      TransformerHeadOptions(4).input_size(24).d_model(32).num_heads(4).attention(softmax));
  other->to(torch::kCUDA);
  other->eval();
  EXPECT_THROW(TransformerStepGraph(*other, 1), c10::Error);
  attention::AttentionOptions causal_linear;
  causal_linear.type = "causal-linear";
  TransformerHead on_cpu(
      TransformerHeadOptions(4).input_size(24).d_model(32).num_heads(4).attention(causal_linear));
  on_cpu->eval();
  EXPECT_THROW(TransformerStepGraph(*on_cpu, 1), c10::Error);
}

TEST(TransformerStepGraph, ServesVideoModelStreamsAsTheEagerStepDoes) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU is visible";
  ModelConfig config;
  config.name = "stream";
  config.version = "1";
  config.labels = {"a", "b", "c"};
  config.head = HeadType::kTransformer;
  config.transformer.attention.type = "causal-linear";
  config.transformer.attention_substitutions = {};
  InferenceOptions options = InferenceOptions::Exact();
  options.device = torch::Device(torch::kCUDA, 0);
  torch::manual_seed(3);
  auto captured = VideoModel::Create(config, options);
  ASSERT_TRUE(captured.ok()) << captured.status();
  options.cuda_graph_step = false;
  torch::manual_seed(3);
  auto eager = VideoModel::Create(config, options);
  ASSERT_TRUE(eager.ok()) << eager.status();
  const torch::Tensor frames = torch::randn({1, 30, 512});
  HeadState captured_state, eager_state;
  int64_t begin = 0;
  // 1, 2 and 4 frames take the graph; 16 is past what it replays, so the eager step takes over.
  for (const int64_t chunk : {1, 2, 4, 16, 1, 4, 2}) {
    const torch::Tensor next = frames.slice(1, begin, begin + chunk);
    begin += chunk;
    auto from_graph = (*captured)->StreamStep(next, captured_state);
    auto from_eager = (*eager)->StreamStep(next, eager_state);
    ASSERT_TRUE(from_graph.ok() && from_eager.ok()) << from_graph.status() << from_eager.status();
    EXPECT_TRUE(torch::allclose(from_graph->first, from_eager->first, 1e-4, 1e-5))
        << "after " << begin << " frames";
    captured_state = from_graph->second;
    eager_state = from_eager->second;
  }
  ExpectSameState(captured_state, eager_state);
}

#else

TEST(TransformerStepGraph, NeedsLibTorchWithCuda) {
  GTEST_SKIP() << "this LibTorch has no CUDA, so no CUDA graphs";
}

#endif  // VIDCLF_TORCH_CUDA

}  // namespace
}  // namespace vidclf::model
