#include "model/heads/gru_head.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

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

TEST(GruHead, InputDropoutActsOnlyWhileTraining) {
  torch::manual_seed(3);
  GruHead head(GruHeadOptions(/*num_classes=*/5).input_size(12).input_dropout(0.5));
  // No module of its own: weights saved without the option load into a head with it.
  EXPECT_EQ(head->named_children().size(), 3U);
  torch::NoGradGuard no_grad;
  const torch::Tensor x = torch::randn({2, 6, 12});
  const torch::Tensor lengths = torch::tensor({6, 3}, torch::kLong);
  head->eval();
  const torch::Tensor served = head->forward(x, lengths);
  EXPECT_TRUE(torch::equal(served, head->forward(x, lengths)));
  head->train();
  EXPECT_FALSE(torch::allclose(head->forward(x, lengths), served));
  EXPECT_THROW(GruHead(GruHeadOptions(5).input_dropout(1.0)), c10::Error);
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

// Seed 004's GRU cell in LibTorch's layout (rows of weight_ih_l{k} and weight_hh_l{k} ordered r, z,
// n; separate b_ih and b_hh), written out step by step in float64:
//   r = sigmoid(W_ir x + b_ir + W_hr h + b_hr),  z = sigmoid(W_iz x + b_iz + W_hz h + b_hz),
//   n = tanh(W_in x + b_in + r * (W_hn h + b_hn)),  h' = z * h + (1 - z) * n.
torch::Tensor ReferenceGruCell(const torch::Tensor& x, const torch::Tensor& h,
                               const torch::Tensor& w_ih, const torch::Tensor& w_hh,
                               const torch::Tensor& b_ih, const torch::Tensor& b_hh) {
  const std::vector<torch::Tensor> wi = w_ih.chunk(3), wh = w_hh.chunk(3);
  const std::vector<torch::Tensor> bi = b_ih.chunk(3), bh = b_hh.chunk(3);
  const torch::Tensor r = torch::sigmoid(torch::mv(wi[0], x) + bi[0] + torch::mv(wh[0], h) + bh[0]);
  const torch::Tensor z = torch::sigmoid(torch::mv(wi[1], x) + bi[1] + torch::mv(wh[1], h) + bh[1]);
  const torch::Tensor n =
      torch::tanh(torch::mv(wi[2], x) + bi[2] + r * (torch::mv(wh[2], h) + bh[2]));
  return z * h + (1 - z) * n;
}

TEST(GruHead, EqualsAHandWrittenLoopOfTheSeed004Equations) {
  GruHead head = SmallHead();
  torch::NoGradGuard no_grad;
  // Non-trivial standardisation, so a head that skipped or misapplied it would differ.
  head->embedding_mean.copy_(3 * torch::randn({12}));
  head->embedding_std.copy_(0.5 + 2 * torch::rand({12}));
  const std::vector<int64_t> lengths = {6, 3, 1};
  // Padding past each length is large garbage: the reference never reads it.
  torch::Tensor embeddings = torch::randn({3, 6, 12});
  for (int64_t b = 0; b < 3; ++b) embeddings[b].slice(0, lengths[b]).normal_(0, 1e3);
  const torch::Tensor logits = head->forward(embeddings, torch::tensor(lengths, torch::kLong));

  const auto param = [&](const std::string& name) {
    return head->gru->named_parameters()[name].to(torch::kDouble);
  };
  const auto f64 = [](const torch::Tensor& t) { return t.to(torch::kDouble); };
  const torch::Tensor standardised =
      (f64(embeddings) - f64(head->embedding_mean)) / f64(head->embedding_std);
  const int64_t layers = head->options.num_layers(), hidden = head->options.hidden_size();
  ASSERT_EQ(layers, 2);
  std::vector<torch::Tensor> expected;
  for (int64_t b = 0; b < 3; ++b) {
    std::vector<torch::Tensor> h(layers, torch::zeros({hidden}, torch::kDouble));
    for (int64_t t = 0; t < lengths[b]; ++t) {
      torch::Tensor x = standardised[b][t];
      for (int64_t l = 0; l < layers; ++l) {
        const std::string suffix = "_l" + std::to_string(l);
        h[l] = ReferenceGruCell(x, h[l], param("weight_ih" + suffix), param("weight_hh" + suffix),
                                param("bias_ih" + suffix), param("bias_hh" + suffix));
        x = h[l];
      }
    }
    const torch::Tensor hidden_mlp =
        torch::relu(torch::mv(f64(head->fc1->weight), h.back()) + f64(head->fc1->bias));
    expected.push_back(torch::mv(f64(head->fc2->weight), hidden_mlp) + f64(head->fc2->bias));
  }
  const double max_diff =
      (logits.to(torch::kDouble) - torch::stack(expected)).abs().max().item<double>();
  EXPECT_LE(max_diff, 1e-5);
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
