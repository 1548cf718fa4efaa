#include "model/heads/transformer_head.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/attention/registry.h"

namespace vidclf::model {
namespace {

TransformerHeadOptions SmallOptions(const std::string& attention_type) {
  attention::AttentionOptions attention;
  attention.type = attention_type;
  attention.max_length = 16;
  attention.parameters["linformer_k"] = 8;
  attention.parameters["nystrom_landmarks"] = 4;
  attention.parameters["clusters"] = 3;
  attention.parameters["topk"] = 4;
  return TransformerHeadOptions(/*num_classes=*/4)
      .input_size(12)
      .d_model(16)
      .num_heads(2)
      .num_layers(2)
      .ffn_size(32)
      .dropout(0)
      .attention(attention);
}

TransformerHead EvalHead(const TransformerHeadOptions& options) {
  torch::manual_seed(9);
  TransformerHead head(options);
  head->eval();
  return head;
}

TEST(SinusoidalPositionalEncoding, MatchesGoldenValues) {
  const torch::Tensor pe = SinusoidalPositionalEncoding(/*length=*/4, /*d_model=*/8);
  ASSERT_EQ(pe.sizes(), (std::vector<int64_t>{4, 8}));
  // Position 0: sin 0 = 0 on even columns, cos 0 = 1 on odd ones.
  EXPECT_TRUE(torch::equal(pe[0], torch::tensor({0.f, 1.f, 0.f, 1.f, 0.f, 1.f, 0.f, 1.f})));
  // PE(1, 0) = sin(1), PE(1, 1) = cos(1), PE(3, 2) = sin(3 / 10000^(2/8)) = sin(0.3).
  EXPECT_NEAR(pe[1][0].item<float>(), 0.8414710, 1e-6);
  EXPECT_NEAR(pe[1][1].item<float>(), 0.5403023, 1e-6);
  EXPECT_NEAR(pe[3][2].item<float>(), 0.2955202, 1e-6);
  EXPECT_NEAR(pe[2][7].item<float>(), std::cos(2 / 1000.0), 1e-6);  // 10000^(6/8) = 1000
  EXPECT_LE(pe.abs().max().item<float>(), 1.0f);
}

TEST(TransformerHead, HasSeed004Defaults) {
  TransformerHeadOptions options(5);
  EXPECT_EQ(options.d_model(), 512);
  EXPECT_EQ(options.num_heads(), 8);
  EXPECT_EQ(options.num_layers(), 6);
  EXPECT_EQ(options.ffn_size(), 1024);
  EXPECT_FALSE(options.pre_norm());
  TransformerHead head(options);
  int64_t per_layer = 0;
  for (const torch::Tensor& p : head->layers[0]->parameters()) per_layer += p.numel();
  EXPECT_EQ(per_layer, 2102784);  // one PyTorch TransformerEncoderLayer(512, 8, 1024)
}

TEST(TransformerHead, ProbabilitiesSumToOneForEveryPoolingAndNorm) {
  for (const Pooling pooling : {Pooling::kMean, Pooling::kCls}) {
    for (bool pre_norm : {false, true}) {
      TransformerHead head = EvalHead(SmallOptions("softmax").pooling(pooling).pre_norm(pre_norm));
      torch::NoGradGuard no_grad;
      const torch::Tensor logits =
          head->forward(torch::randn({3, 5, 12}), torch::tensor({5, 3, 1}, torch::kLong));
      ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{3, 4}));
      EXPECT_TRUE(torch::allclose(torch::softmax(logits, -1).sum(-1), torch::ones({3}), 1e-6, 1e-6))
          << PoolingName(pooling) << (pre_norm ? " pre-norm" : " post-norm");
    }
  }
}

// For every registered mechanism: padding never changes a valid output, and a batch gives what
// each sequence gives alone.
class TransformerHeadAttentionTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TransformerHeadAttentionTest, PaddingAndBatchingDoNotChangeOutputs) {
  TransformerHead head = EvalHead(SmallOptions(GetParam()));
  torch::NoGradGuard no_grad;
  torch::manual_seed(2);
  const torch::Tensor sequences = torch::randn({3, 9, 12});
  const torch::Tensor lengths = torch::tensor({9, 6, 4}, torch::kLong);
  const torch::Tensor batched = head->forward(sequences, lengths);
  for (int64_t i = 0; i < 3; ++i) {
    const int64_t n = lengths[i].item<int64_t>();
    const torch::Tensor alone =
        head->forward(sequences.slice(0, i, i + 1).slice(1, 0, n), torch::tensor({n}));
    EXPECT_TRUE(torch::allclose(alone, batched.slice(0, i, i + 1), 1e-4, 1e-5))
        << GetParam() << " sequence " << i << ": " << alone << " vs " << batched[i];
  }
  // Garbage in the padding changes nothing.
  torch::Tensor noisy = sequences.clone();
  noisy.slice(0, 1, 2).slice(1, 6) = 1e3;
  EXPECT_TRUE(torch::allclose(head->forward(noisy, lengths), batched, 1e-4, 1e-5)) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(AllMechanisms, TransformerHeadAttentionTest,
                         ::testing::ValuesIn(attention::AttentionNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(TransformerHead, RejectsInconsistentOptions) {
  EXPECT_THROW(TransformerHead(SmallOptions("softmax").num_heads(3)), c10::Error);
  EXPECT_THROW(TransformerHead(SmallOptions("causal-linear").pooling(Pooling::kCls)), c10::Error);
  EXPECT_FALSE(ParsePooling("max").ok());
}

}  // namespace
}  // namespace vidclf::model
