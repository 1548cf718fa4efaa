#include "model/heads/head_stream.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "model/heads/gru_head.h"
#include "model/heads/transformer_head.h"

namespace vidclf::model {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kInputSize = 12;
constexpr int64_t kFrames = 20;

double LargestDifference(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

// Heads whose standardisation is not the identity, so that step() must apply it too.
template <typename Head>
void SetStandardisation(Head& head) {
  torch::NoGradGuard no_grad;
  head->embedding_mean.copy_(torch::randn({kInputSize}) * 0.1);
  head->embedding_std.copy_(torch::rand({kInputSize}) + 0.5);
}

std::shared_ptr<TemporalHead> MakeGru() {
  torch::manual_seed(4);
  GruHead head(GruHeadOptions(/*num_classes=*/3).input_size(kInputSize).hidden_size(8));
  SetStandardisation(head);
  head->eval();
  return head.ptr();
}

std::shared_ptr<TemporalHead> MakeTransformer(const std::string& attention_type, bool pre_norm,
                                              Pooling pooling = Pooling::kMean) {
  torch::manual_seed(5);
  attention::AttentionOptions attention;
  attention.type = attention_type;
  TransformerHead head(TransformerHeadOptions(/*num_classes=*/3)
                           .input_size(kInputSize)
                           .d_model(16)
                           .num_heads(2)
                           .num_layers(2)
                           .ffn_size(24)
                           .pre_norm(pre_norm)
                           .pooling(pooling)
                           .dropout(0)
                           .attention(attention));
  SetStandardisation(head);
  // Layer norms other than the identity they start as, so that a path that dropped their weight
  // or bias would show.
  torch::NoGradGuard no_grad;
  for (const auto& module : head->modules()) {
    if (auto* norm = module->as<torch::nn::LayerNorm>()) {
      norm->weight.uniform_(0.5, 1.5);
      norm->bias.normal_(0.0, 0.5);
    }
  }
  head->eval();
  return head.ptr();
}

torch::Tensor PrefixLogits(TemporalHead& head, const torch::Tensor& embeddings, int64_t length) {
  return head.forward(embeddings.slice(1, 0, length),
                      torch::full({embeddings.size(0)}, length, torch::kLong));
}

// Feeds `embeddings` [B, T, D] in chunks of `chunk` frames and checks each step's logits against
// forward() over the prefix seen so far.
void ExpectStepsEqualPrefixes(TemporalHead& head, const torch::Tensor& embeddings, int64_t chunk) {
  HeadState state;
  for (int64_t start = 0; start < embeddings.size(1); start += chunk) {
    const int64_t end = std::min(start + chunk, embeddings.size(1));
    auto [logits, next] = head.step(embeddings.slice(1, start, end), state);
    ASSERT_EQ(next.frames_seen, end);
    EXPECT_LT(LargestDifference(logits, PrefixLogits(head, embeddings, end)), 1e-5)
        << "chunk " << chunk << ", after " << end << " frames";
    state = std::move(next);
  }
}

class RecurrentHeads : public ::testing::TestWithParam<std::string> {
 protected:
  std::shared_ptr<TemporalHead> Head() const {
    if (GetParam() == "gru") return MakeGru();
    return MakeTransformer("causal-linear", /*pre_norm=*/GetParam() == "causal-linear-pre-norm");
  }
};

TEST_P(RecurrentHeads, ChunkedStepsEqualTheFullSequenceForAnyChunking) {
  torch::NoGradGuard no_grad;
  const std::shared_ptr<TemporalHead> head = Head();
  ASSERT_TRUE(head->has_recurrent_step());
  torch::manual_seed(6);
  const torch::Tensor embeddings = torch::randn({2, kFrames, kInputSize});
  for (int64_t chunk : {int64_t{1}, int64_t{3}, int64_t{7}, kFrames}) {
    ExpectStepsEqualPrefixes(*head, embeddings, chunk);
  }
}

TEST_P(RecurrentHeads, StateSizeDoesNotGrowWithTheFramesSeen) {
  torch::NoGradGuard no_grad;
  const std::shared_ptr<TemporalHead> head = Head();
  auto numel = [](const HeadState& state) {
    int64_t total = 0;
    for (const torch::Tensor& t : state.tensors) total += t.numel();
    return total;
  };
  HeadState state = head->step(torch::randn({1, 1, kInputSize}), {}).second;
  const int64_t after_one = numel(state);
  for (int i = 0; i < 500; ++i) state = head->step(torch::randn({1, 1, kInputSize}), state).second;
  EXPECT_EQ(state.frames_seen, 501);
  EXPECT_EQ(numel(state), after_one);
}

TEST_P(RecurrentHeads, RejectsAStateFromAnotherBatchSize) {
  torch::NoGradGuard no_grad;
  const std::shared_ptr<TemporalHead> head = Head();
  const HeadState state = head->step(torch::randn({2, 3, kInputSize}), {}).second;
  EXPECT_THROW(head->step(torch::randn({1, 3, kInputSize}), state), c10::Error);
}

// Four streams at different points, one of them fresh, stepped together: each gets the logits and
// state it gets stepped alone, and goes on alone from that state.
TEST_P(RecurrentHeads, StreamsSteppedTogetherEqualEachSteppedAlone) {
  torch::NoGradGuard no_grad;
  const std::shared_ptr<TemporalHead> head = Head();
  torch::manual_seed(9);
  const std::vector<int64_t> seen = {5, 0, 1, 12};
  std::vector<HeadState> states;
  for (const int64_t frames : seen) {
    states.push_back(frames == 0 ? HeadState{}
                                 : head->step(torch::randn({1, frames, kInputSize}), {}).second);
  }
  for (const int64_t chunk : {1, 3}) {
    const torch::Tensor embeddings = torch::randn({4, chunk, kInputSize});
    auto [logits, next] = head->StepEach(embeddings, states);
    ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{4, 3}));
    ASSERT_EQ(next.size(), 4u);
    for (int64_t b = 0; b < 4; ++b) {
      auto [alone_logits, alone_next] = head->step(embeddings.narrow(0, b, 1), states[b]);
      EXPECT_LT(LargestDifference(logits.narrow(0, b, 1), alone_logits), 1e-5)
          << "stream " << b << ", chunk " << chunk;
      EXPECT_EQ(next[b].frames_seen, alone_next.frames_seen);
      ASSERT_EQ(next[b].tensors.size(), alone_next.tensors.size());
      for (size_t k = 0; k < alone_next.tensors.size(); ++k) {
        EXPECT_LT(LargestDifference(next[b].tensors[k], alone_next.tensors[k]), 1e-5);
      }
      const torch::Tensor more = torch::randn({1, 2, kInputSize});
      EXPECT_LT(
          LargestDifference(head->step(more, next[b]).first, head->step(more, alone_next).first),
          1e-5)
          << "stream " << b << " went on differently";
    }
    states = std::move(next);
  }
}

TEST_P(RecurrentHeads, StepEachRefusesStatesThatDoNotMatchTheStreams) {
  torch::NoGradGuard no_grad;
  const std::shared_ptr<TemporalHead> head = Head();
  const HeadState two = head->step(torch::randn({2, 3, kInputSize}), {}).second;
  const HeadState one = head->step(torch::randn({1, 3, kInputSize}), {}).second;
  EXPECT_THROW(head->StepEach(torch::randn({2, 1, kInputSize}), {one}), c10::Error);
  EXPECT_THROW(head->StepEach(torch::randn({2, 1, kInputSize}), {one, two}), c10::Error);
  EXPECT_THROW(head->StepEach(torch::randn({0, 1, kInputSize}), {}), c10::Error);
}

INSTANTIATE_TEST_SUITE_P(HeadStream, RecurrentHeads,
                         ::testing::Values("gru", "causal-linear-post-norm",
                                           "causal-linear-pre-norm"));

// MakeTransformer's causal-linear head, as the transformer it is.
std::shared_ptr<TransformerHeadImpl> MakeCausalLinear(bool pre_norm,
                                                      Pooling pooling = Pooling::kMean) {
  return std::dynamic_pointer_cast<TransformerHeadImpl>(
      MakeTransformer("causal-linear", pre_norm, pooling));
}

// The states of four streams: fresh, and after 1, 7 and 300 random frames.
std::vector<HeadState> FreshAndAdvancedStates(TemporalHead& head) {
  torch::NoGradGuard no_grad;
  std::vector<HeadState> states(1);
  for (const int64_t frames : {1, 7, 300}) {
    states.push_back(head.step(torch::randn({1, frames, kInputSize}), {}).second);
  }
  return states;
}

// One frame per stream on the CPU without gradients takes causal-linear attention's written-out
// step (TransformerHeadImpl::StepOneFrameEach); with gradients on, the states are joined and
// stepped by tensor operations. Both give the same logits and states, for fresh streams and
// streams far along, in post-norm and pre-norm stacks, pooling the mean or the last frame.
TEST(HeadStream, OneFrameWrittenOutEqualsTheJoinedStep) {
  for (const auto& [pre_norm, pooling] :
       {std::pair{false, Pooling::kMean}, {true, Pooling::kMean}, {false, Pooling::kLast}}) {
    const std::shared_ptr<TransformerHeadImpl> head = MakeCausalLinear(pre_norm, pooling);
    ASSERT_NE(head, nullptr);
    torch::manual_seed(10);
    const std::vector<HeadState> states = FreshAndAdvancedStates(*head);
    const torch::Tensor frame = torch::randn({4, 1, kInputSize});
    ASSERT_FALSE(head->StepsOneFrameWrittenOut(frame));  // gradients are on
    auto [joined_logits, joined] = head->StepEach(frame, states);
    torch::NoGradGuard no_grad;
    ASSERT_TRUE(head->StepsOneFrameWrittenOut(frame));
    EXPECT_FALSE(head->StepsOneFrameWrittenOut(torch::randn({4, 2, kInputSize})));
    auto [logits, written] = head->StepEach(frame, states);
    EXPECT_LT(LargestDifference(logits, joined_logits.detach()), 1e-5) << "pre-norm " << pre_norm;
    ASSERT_EQ(written.size(), joined.size());
    for (size_t b = 0; b < written.size(); ++b) {
      EXPECT_EQ(written[b].frames_seen, joined[b].frames_seen);
      ASSERT_EQ(written[b].tensors.size(), joined[b].tensors.size());
      for (size_t k = 0; k < written[b].tensors.size(); ++k) {
        const torch::Tensor want = joined[b].tensors[k].detach();
        ASSERT_EQ(written[b].tensors[k].sizes(), want.sizes())
            << "stream " << b << ", tensor " << k;
        EXPECT_LT(LargestDifference(written[b].tensors[k], want),
                  1e-5 * (1 + want.abs().max().item<double>()))
            << "stream " << b << ", tensor " << k << ", pre-norm " << pre_norm;
      }
    }
  }
}

// With int8 step weights, a step of one frame per stream moves by what rounding the weights moves
// it, and no more; steps of several frames keep the float32 weights exactly. Heads without a
// one-frame step decline.
TEST(HeadStream, Int8StepWeightsRoundOnlyTheOneFrameStep) {
  torch::NoGradGuard no_grad;
  EXPECT_FALSE(MakeTransformer("softmax", /*pre_norm=*/false)->UseInt8StepWeights());
  EXPECT_FALSE(MakeGru()->UseInt8StepWeights());
  for (const bool pre_norm : {false, true}) {
    const std::shared_ptr<TransformerHeadImpl> head = MakeCausalLinear(pre_norm);
    ASSERT_NE(head, nullptr);
    torch::manual_seed(11);
    const std::vector<HeadState> states = FreshAndAdvancedStates(*head);
    const torch::Tensor frame = torch::randn({4, 1, kInputSize});
    const torch::Tensor chunk = torch::randn({4, 2, kInputSize});
    const torch::Tensor float_logits = head->StepEach(frame, states).first;
    const torch::Tensor float_alone = head->step(frame.narrow(0, 3, 1), states[3]).first;
    const torch::Tensor float_chunk = head->StepEach(chunk, states).first;
    EXPECT_FALSE(head->int8_step_weights());
    ASSERT_TRUE(head->UseInt8StepWeights());
    EXPECT_TRUE(head->int8_step_weights());
    const double bound = 0.02 * (1 + float_logits.abs().max().item<double>());
    const double moved = LargestDifference(head->StepEach(frame, states).first, float_logits);
    EXPECT_GT(moved, 0.0) << "pre-norm " << pre_norm << ": the step kept float32 weights";
    EXPECT_LT(moved, bound) << "pre-norm " << pre_norm;
    EXPECT_LT(LargestDifference(head->step(frame.narrow(0, 3, 1), states[3]).first, float_alone),
              bound);
    EXPECT_TRUE(torch::equal(head->StepEach(chunk, states).first, float_chunk));
  }
}

TEST(HeadStream, OnlyGruAndCausalLinearHaveARecurrentStep) {
  torch::NoGradGuard no_grad;
  const std::shared_ptr<TemporalHead> softmax = MakeTransformer("softmax", /*pre_norm=*/false);
  EXPECT_FALSE(softmax->has_recurrent_step());
  try {
    softmax->step(torch::randn({1, 2, kInputSize}), {});
    FAIL() << "softmax transformer stepped";
  } catch (const c10::Error& e) {
    EXPECT_THAT(e.what_without_backtrace(), HasSubstr("sliding window"));
  }
}

TEST(HeadStream, RecurrentHeadsIgnoreTheWindow) {
  torch::NoGradGuard no_grad;
  const std::shared_ptr<TemporalHead> head = MakeGru();
  torch::manual_seed(8);
  const torch::Tensor embeddings = torch::randn({1, 9, kInputSize});
  const SlidingWindowOptions window{/*window_frames=*/2, /*stride_frames=*/2};
  auto [logits, state] = StepHead(*head, window, embeddings, {});
  EXPECT_LT(LargestDifference(logits, PrefixLogits(*head, embeddings, 9)), 1e-5);
}

// Without a recurrent step, the logits come from the last window evaluated: at the first step and
// whenever the frames seen pass a multiple of the stride.
TEST(HeadStream, SlidingWindowReevaluatesTheLatestFramesEveryStride) {
  torch::NoGradGuard no_grad;
  const std::shared_ptr<TemporalHead> head =
      MakeTransformer("softmax", /*pre_norm=*/false, Pooling::kCls);
  const SlidingWindowOptions window{/*window_frames=*/5, /*stride_frames=*/3};
  torch::manual_seed(7);
  const torch::Tensor embeddings = torch::randn({2, kFrames, kInputSize});
  for (int64_t chunk : {1, 2, 4}) {
    HeadState state;
    torch::Tensor expected;
    for (int64_t start = 0; start < kFrames; start += chunk) {
      const int64_t end = std::min(start + chunk, kFrames);
      auto [logits, next] = StepHead(*head, window, embeddings.slice(1, start, end), state);
      if (start == 0 || end / window.stride_frames > start / window.stride_frames) {
        const int64_t first = std::max<int64_t>(0, end - window.window_frames);
        expected = head->forward(embeddings.slice(1, first, end),
                                 torch::full({2}, end - first, torch::kLong));
      }
      EXPECT_LT(LargestDifference(logits, expected), 1e-6) << "chunk " << chunk << ", " << end;
      EXPECT_LE(next.tensors.front().size(1), window.window_frames);
      state = std::move(next);
    }
  }
}

// Without a recurrent step, streams stepped together are each stepped over its own window.
TEST(HeadStream, SlidingWindowStreamsSteppedTogetherEqualEachSteppedAlone) {
  torch::NoGradGuard no_grad;
  const std::shared_ptr<TemporalHead> head = MakeTransformer("softmax", /*pre_norm=*/false);
  const SlidingWindowOptions window{/*window_frames=*/4, /*stride_frames=*/2};
  torch::manual_seed(10);
  const std::vector<HeadState> states = {
      {}, StepHead(*head, window, torch::randn({1, 3, kInputSize}), {}).second};
  const torch::Tensor embeddings = torch::randn({2, 1, kInputSize});
  auto [logits, next] = StepHeadEach(*head, window, embeddings, states);
  ASSERT_EQ(next.size(), 2u);
  for (int64_t b = 0; b < 2; ++b) {
    auto [alone_logits, alone_next] =
        StepHead(*head, window, embeddings.narrow(0, b, 1), states[b]);
    EXPECT_LT(LargestDifference(logits.narrow(0, b, 1), alone_logits), 1e-6) << "stream " << b;
    EXPECT_EQ(next[b].frames_seen, alone_next.frames_seen);
  }
}

TEST(HeadStream, SlidingWindowRejectsBadOptionsAndStates) {
  torch::NoGradGuard no_grad;
  const std::shared_ptr<TemporalHead> head = MakeTransformer("linear", /*pre_norm=*/false);
  const torch::Tensor frames = torch::randn({1, 2, kInputSize});
  EXPECT_THROW(StepHead(*head, {/*window_frames=*/2, /*stride_frames=*/3}, frames, {}), c10::Error);
  const HeadState state = StepHead(*head, {}, frames, {}).second;
  EXPECT_THROW(StepHead(*head, {}, torch::randn({3, 2, kInputSize}), state), c10::Error);
}

}  // namespace
}  // namespace vidclf::model
