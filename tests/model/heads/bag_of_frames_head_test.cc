// The order-blind baseline: the same answer for any order of the frames, padding ignored, and a
// streaming step that continues the sequence exactly.
#include "model/heads/bag_of_frames_head.h"

#include <gtest/gtest.h>

namespace vidclf::model {
namespace {

TEST(BagOfFramesHead, IgnoresOrderAndPadding) {
  torch::manual_seed(3);
  BagOfFramesHead head(/*input_size=*/8, /*num_classes=*/3);
  head->eval();
  const torch::Tensor frames = torch::randn({1, 5, 8});
  const torch::Tensor lengths = torch::tensor({5}, torch::kLong);
  const torch::Tensor logits = head->forward(frames, lengths);
  EXPECT_TRUE(torch::allclose(head->forward(frames.flip(1), lengths), logits, 1e-5, 1e-6));
  torch::Tensor padded = torch::cat({frames, torch::full({1, 3, 8}, 1e3)}, 1);
  EXPECT_TRUE(torch::allclose(head->forward(padded, lengths), logits, 1e-5, 1e-6));
}

TEST(BagOfFramesHead, StepContinuesTheSequence) {
  torch::manual_seed(4);
  BagOfFramesHead head(/*input_size=*/8, /*num_classes=*/3);
  head->eval();
  ASSERT_TRUE(head->has_recurrent_step());
  const torch::Tensor frames = torch::randn({2, 7, 8});
  HeadState state;
  torch::Tensor logits;
  for (const auto& [begin, end] : {std::pair{0, 3}, std::pair{3, 4}, std::pair{4, 7}}) {
    std::tie(logits, state) = head->step(frames.slice(1, begin, end), state);
  }
  EXPECT_EQ(state.frames_seen, 7);
  EXPECT_TRUE(torch::allclose(logits, head->forward(frames, torch::tensor({7, 7})), 1e-5, 1e-6));
  EXPECT_THROW(head->step(torch::randn({3, 1, 8}), state), c10::Error);  // state of 2 sequences
}

}  // namespace
}  // namespace vidclf::model
