// Per-frame logits (TemporalHead::forward_frames), the output of segmentation models: a head with
// a recurrent step says of frame t what forward() says of frames 0..t, so that a live stream
// stepped frame by frame is labelled as the head was trained; other heads look both ways, and
// padding changes nothing in either.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "model/heads/bag_of_frames_head.h"
#include "model/heads/gru_head.h"
#include "model/heads/transformer_head.h"

namespace vidclf::model::forward_frames_test {
namespace {

constexpr int64_t kInputSize = 10;
constexpr int64_t kFrames = 12;
constexpr int64_t kClasses = 3;

double LargestDifference(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

std::shared_ptr<TemporalHead> MakeTransformer(const std::string& attention_type, Pooling pooling) {
  torch::manual_seed(5);
  attention::AttentionOptions attention;
  attention.type = attention_type;
  TransformerHead head(TransformerHeadOptions(kClasses)
                           .input_size(kInputSize)
                           .d_model(16)
                           .num_heads(2)
                           .num_layers(2)
                           .ffn_size(24)
                           .pooling(pooling)
                           .dropout(0)
                           .attention(attention));
  head->eval();
  return head.ptr();
}

std::shared_ptr<TemporalHead> MakeHeadOf(const std::string& name) {
  torch::manual_seed(4);
  if (name == "gru") {
    GruHead head(GruHeadOptions(kClasses).input_size(kInputSize).hidden_size(8));
    head->eval();
    return head.ptr();
  }
  if (name == "bag-of-frames") {
    BagOfFramesHead head(kInputSize, kClasses);
    head->eval();
    return head.ptr();
  }
  return MakeTransformer("causal-linear",
                         name == "causal-linear-last" ? Pooling::kLast : Pooling::kMean);
}

// NAME, or NAME-differences: the same head over frame differences.
std::shared_ptr<TemporalHead> MakeHead(const std::string& name) {
  const std::string suffix = "-differences";
  const bool differences = name.size() > suffix.size() &&
                           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  std::shared_ptr<TemporalHead> head =
      MakeHeadOf(differences ? name.substr(0, name.size() - suffix.size()) : name);
  head->set_frame_differences(differences);
  return head;
}

class RecurrentFrames : public ::testing::TestWithParam<std::string> {};

// Two videos, the second padded after 7 frames: every valid frame's logits are those of its
// prefix, and a stream stepped a frame at a time gets the same.
TEST_P(RecurrentFrames, EachFrameIsWhatForwardSaysOfItsPrefix) {
  torch::NoGradGuard no_grad;
  const std::shared_ptr<TemporalHead> head = MakeHead(GetParam());
  ASSERT_TRUE(head->has_recurrent_step());
  torch::manual_seed(6);
  const torch::Tensor embeddings = torch::randn({2, kFrames, kInputSize});
  const torch::Tensor lengths = torch::tensor({kFrames, int64_t{7}}, torch::kLong);
  const torch::Tensor frames = head->forward_frames(embeddings, lengths);
  ASSERT_EQ(frames.sizes(), (std::vector<int64_t>{2, kFrames, kClasses}));
  for (int64_t video = 0; video < 2; ++video) {
    HeadState state;
    for (int64_t t = 0; t < lengths[video].item<int64_t>(); ++t) {
      const torch::Tensor prefix = embeddings.slice(0, video, video + 1).slice(1, 0, t + 1);
      const torch::Tensor expected = head->forward(prefix, torch::full({1}, t + 1, torch::kLong));
      EXPECT_LT(LargestDifference(frames.select(0, video).select(0, t), expected[0]), 1e-4)
          << "video " << video << ", frame " << t;
      auto [stepped, next] = head->step(prefix.slice(1, t, t + 1), state);
      EXPECT_LT(LargestDifference(frames.select(0, video).select(0, t), stepped[0]), 1e-4)
          << "stepped, video " << video << ", frame " << t;
      state = std::move(next);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ForwardFrames, RecurrentFrames,
                         ::testing::Values("gru", "bag-of-frames", "causal-linear-mean",
                                           "causal-linear-last", "gru-differences",
                                           "bag-of-frames-differences"));

// Over frame differences a step keeps the last frame it saw: steps of any size, and streams
// stepped together (one of them fresh), give the logits of the whole sequence at once.
TEST(ForwardFrames, StepsOverFrameDifferencesContinueTheSequence) {
  torch::NoGradGuard no_grad;
  for (const std::string name : {"gru-differences", "bag-of-frames-differences"}) {
    const std::shared_ptr<TemporalHead> head = MakeHead(name);
    ASSERT_TRUE(head->has_recurrent_step()) << name;
    torch::manual_seed(11);
    const torch::Tensor embeddings = torch::randn({2, kFrames, kInputSize});
    const torch::Tensor frames =
        head->forward_frames(embeddings, torch::full({2}, kFrames, torch::kLong));
    HeadState state;
    for (int64_t start = 0; start < kFrames; start += 5) {
      const int64_t end = std::min(start + 5, kFrames);
      auto [logits, next] = head->step(embeddings.slice(1, start, end), state);
      EXPECT_LT(LargestDifference(logits, frames.select(1, end - 1)), 1e-4)
          << name << ", after " << end << " frames";
      state = std::move(next);
    }
    const HeadState advanced = head->step(embeddings.slice(0, 0, 1).slice(1, 0, 4), {}).second;
    auto [logits, next] = head->StepEach(torch::cat({embeddings.slice(0, 0, 1).slice(1, 4, 5),
                                                     embeddings.slice(0, 1, 2).slice(1, 0, 1)}),
                                         {advanced, HeadState{}});
    EXPECT_LT(LargestDifference(logits[0], frames[0][4]), 1e-4) << name;
    EXPECT_LT(LargestDifference(logits[1], frames[1][0]), 1e-4) << name;
    EXPECT_EQ(next[1].frames_seen, 1);
  }
}

// Over frame differences a head sees what moves, not what is there: a texture added to every
// frame changes no answer, and each frame is still what forward() says of its prefix.
TEST(ForwardFrames, FrameDifferencesSeeOnlyWhatChanges) {
  torch::NoGradGuard no_grad;
  for (const std::string name : {"gru", "causal-linear-last"}) {
    const std::shared_ptr<TemporalHead> head = MakeHead(name + "-differences");
    EXPECT_TRUE(head->causal());
    torch::manual_seed(10);
    const torch::Tensor embeddings = torch::randn({1, kFrames, kInputSize});
    const torch::Tensor lengths = torch::full({1}, kFrames, torch::kLong);
    const torch::Tensor frames = head->forward_frames(embeddings, lengths);
    const torch::Tensor textured = embeddings + torch::randn({1, 1, kInputSize}) * 5;
    EXPECT_LT(LargestDifference(head->forward_frames(textured, lengths), frames), 1e-4) << name;
    for (int64_t t = 0; t < kFrames; ++t) {
      const torch::Tensor expected =
          head->forward(embeddings.slice(1, 0, t + 1), torch::full({1}, t + 1, torch::kLong));
      EXPECT_LT(LargestDifference(frames.select(1, t), expected), 1e-4) << name << ", frame " << t;
    }
    head->set_frame_differences(false);
    EXPECT_GT(LargestDifference(head->forward_frames(embeddings, lengths), frames), 1e-4) << name;
  }
  // A causal-linear transformer cannot step them yet: a sliding window serves it.
  const std::shared_ptr<TemporalHead> transformer = MakeHead("causal-linear-last-differences");
  EXPECT_FALSE(transformer->has_recurrent_step());
  try {
    transformer->step(torch::randn({1, 1, kInputSize}), {});
    ADD_FAILURE() << "stepped over frame differences";
  } catch (const c10::Error& error) {
    EXPECT_NE(std::string(error.what()).find("over frame differences has no step yet"),
              std::string::npos)
        << error.what();
  }
}

// A bidirectional head sees both sides of each frame: a later frame changes an earlier one's
// logits; but padding does not, so a video labels alike alone and in a padded batch.
TEST(ForwardFrames, BidirectionalHeadsLookBothWaysButNotAtPadding) {
  torch::NoGradGuard no_grad;
  for (const Pooling pooling : {Pooling::kMean, Pooling::kCls}) {
    const std::shared_ptr<TemporalHead> head = MakeTransformer("softmax", pooling);
    ASSERT_FALSE(head->has_recurrent_step());
    torch::manual_seed(8);
    const torch::Tensor embeddings = torch::randn({2, kFrames, kInputSize});
    const torch::Tensor lengths = torch::tensor({kFrames, int64_t{7}}, torch::kLong);
    const torch::Tensor batched = head->forward_frames(embeddings, lengths);
    ASSERT_EQ(batched.sizes(), (std::vector<int64_t>{2, kFrames, kClasses}));
    const torch::Tensor alone = head->forward_frames(embeddings.slice(0, 1, 2).slice(1, 0, 7),
                                                     torch::full({1}, 7, torch::kLong));
    EXPECT_LT(LargestDifference(batched.slice(0, 1, 2).slice(1, 0, 7), alone), 1e-4)
        << PoolingName(pooling);

    torch::Tensor changed = embeddings.slice(0, 0, 1).clone();
    changed.select(1, kFrames - 1).add_(3);
    const torch::Tensor after =
        head->forward_frames(changed, torch::full({1}, kFrames, torch::kLong));
    EXPECT_GT(LargestDifference(after.select(1, 0), batched.select(0, 0).select(0, 0)), 1e-4)
        << PoolingName(pooling) << ": the first frame did not see the last";
  }
}

}  // namespace
}  // namespace vidclf::model::forward_frames_test
