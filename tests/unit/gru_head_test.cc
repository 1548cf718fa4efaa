#include "model/heads/gru_head.h"

#include <gtest/gtest.h>

namespace vidclf::model {
namespace {

GruHead SmallHead() {
  torch::manual_seed(3);
  GruHead head(GruHeadOptions(/*num_classes=*/5).input_size(12));
  head->eval();
  return head;
}

TEST(GruHead, HasSeed004Defaults) {
  GruHeadOptions options(5);
  EXPECT_EQ(options.input_size(), 512);
  EXPECT_EQ(options.hidden_size(), 32);
  EXPECT_EQ(options.num_layers(), 2);
  EXPECT_EQ(options.mlp_hidden_size(), 16);
  GruHead head(options);
  int64_t count = 0;
  for (const torch::Tensor& p : head->parameters()) count += p.numel();
  EXPECT_EQ(count, 59365);  // 58,752 in the GRU, 613 in 32 -> 16 -> 5 (seed 004 summary)
}

TEST(GruHead, ReturnsLogitsPerSequenceWhoseSoftmaxSumsToOne) {
  GruHead head = SmallHead();
  torch::NoGradGuard no_grad;
  const torch::Tensor logits =
      head->forward(torch::randn({3, 7, 12}), torch::tensor({7, 4, 1}, torch::kLong));
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{3, 5}));
  const torch::Tensor sums = torch::softmax(logits, -1).sum(-1);
  EXPECT_TRUE(torch::allclose(sums, torch::ones({3}), 1e-6, 1e-6));
}

TEST(GruHead, PaddingNeverChangesAValidOutput) {
  GruHead head = SmallHead();
  torch::NoGradGuard no_grad;
  const torch::Tensor sequence = torch::randn({1, 4, 12});
  const torch::Tensor alone = head->forward(sequence, torch::tensor({4}, torch::kLong));
  const torch::Tensor padded = head->forward(
      torch::cat({sequence, 1e3 * torch::randn({1, 6, 12})}, 1), torch::tensor({4}, torch::kLong));
  EXPECT_TRUE(torch::allclose(alone, padded, 1e-5, 1e-6));
}

TEST(GruHead, BatchEqualsSingleSequences) {
  GruHead head = SmallHead();
  torch::NoGradGuard no_grad;
  const torch::Tensor batch = torch::randn({3, 6, 12});
  const torch::Tensor lengths = torch::tensor({6, 2, 5}, torch::kLong);
  const torch::Tensor together = head->forward(batch, lengths);
  for (int64_t i = 0; i < 3; ++i) {
    const torch::Tensor single =
        head->forward(batch.slice(0, i, i + 1), lengths.slice(0, i, i + 1));
    EXPECT_TRUE(torch::allclose(single, together.slice(0, i, i + 1), 1e-5, 1e-6)) << "row " << i;
  }
}

TEST(GruHead, RejectsLengthsOutsideTheSequence) {
  GruHead head = SmallHead();
  EXPECT_THROW(head->forward(torch::randn({1, 3, 12}), torch::tensor({0}, torch::kLong)),
               c10::Error);
  EXPECT_THROW(head->forward(torch::randn({1, 3, 12}), torch::tensor({4}, torch::kLong)),
               c10::Error);
  EXPECT_THROW(head->forward(torch::randn({1, 3, 11}), torch::tensor({3}, torch::kLong)),
               c10::Error);
}

}  // namespace
}  // namespace vidclf::model
