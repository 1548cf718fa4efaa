#include "model/heads/few_rows_linear.h"

#include <gtest/gtest.h>

#include <vector>

namespace vidclf::model {
namespace {

double MaxAbsDifference(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

// Widths around the kernel's 16 partial sums: none, less than, exactly and past one block.
TEST(FewRowsLinear, EqualsTheLayerForAsManyRowsAsItTakesOfAnyWidth) {
  torch::InferenceMode inference;
  torch::manual_seed(1);
  for (int64_t in : {1, 12, 16, 37, 512}) {
    for (int64_t out : {1, 33, 1024}) {
      for (bool bias : {true, false}) {
        torch::nn::Linear layer(torch::nn::LinearOptions(in, out).bias(bias));
        for (int64_t rows = 1; rows <= MaxFewRows(); ++rows) {
          for (const std::vector<int64_t>& shape :
               std::vector<std::vector<int64_t>>{{rows, in}, {rows, 1, in}, {1, rows, in}}) {
            const torch::Tensor x = torch::randn(shape);
            const torch::Tensor got = ApplyLinear(*layer, x);
            const torch::Tensor want = layer->forward(x);
            ASSERT_EQ(got.sizes(), want.sizes());
            EXPECT_LT(MaxAbsDifference(got, want), 1e-5)
                << in << " -> " << out << ", bias " << bias << ", " << rows << " rows";
          }
        }
      }
    }
  }
  torch::nn::Linear layer(8, 3);
  const torch::Tensor vector = torch::randn({8});
  EXPECT_EQ(ApplyLinear(*layer, vector).sizes(), torch::IntArrayRef({3}));
  EXPECT_LT(MaxAbsDifference(ApplyLinear(*layer, vector), layer->forward(vector)), 1e-6);
}

TEST(FewRowsLinear, ReadsAnInputThatIsNotContiguous) {
  torch::InferenceMode inference;
  torch::manual_seed(2);
  torch::nn::Linear layer(40, 24);
  const torch::Tensor x = torch::randn({40, 2}).t();  // [2, 40], strided
  ASSERT_FALSE(x.is_contiguous());
  EXPECT_LT(MaxAbsDifference(ApplyLinear(*layer, x), layer->forward(x)), 1e-5);
}

TEST(FewRowsLinear, LeavesManyRowsGradientsAndOtherTypesToTheLayer) {
  torch::manual_seed(3);
  torch::nn::Linear layer(20, 10);
  {
    torch::InferenceMode inference;
    const torch::Tensor many = torch::randn({MaxFewRows() + 1, 20});
    EXPECT_TRUE(torch::equal(ApplyLinear(*layer, many), layer->forward(many)));
  }
  // With gradients on, the result must carry them back to the weights.
  const torch::Tensor x = torch::randn({1, 20});
  ApplyLinear(*layer, x).sum().backward();
  ASSERT_TRUE(layer->weight.grad().defined());
  EXPECT_LT(MaxAbsDifference(layer->weight.grad(), x.expand({10, 20})), 1e-6);

  torch::InferenceMode inference;
  layer->to(torch::kDouble);
  const torch::Tensor doubles = torch::randn({1, 20}, torch::kDouble);
  EXPECT_TRUE(torch::equal(ApplyLinear(*layer, doubles), layer->forward(doubles)));
  EXPECT_THROW(ApplyLinear(*layer, torch::randn({1, 21}, torch::kDouble)), c10::Error);
  layer->to(torch::kFloat);
  EXPECT_THROW(ApplyLinear(*layer, torch::randn({1, 21})), c10::Error);
}

// Each weight within half its row's scale of the float32 one, the row's largest magnitude at 127,
// a row of zeros exact; applied, equal to the layer with those rounded weights for any number of
// rows (a server may step more live streams together than the float32 kernel takes).
TEST(Int8Linear, RoundsEachRowToItsOwnScaleAndAppliesWhatItStandsFor) {
  torch::InferenceMode inference;
  torch::manual_seed(4);
  torch::nn::Linear layer(48, 9);
  layer->weight.mul_(torch::linspace(0.01, 10.0, 9).unsqueeze(1));  // rows of different ranges
  layer->weight[4].zero_();
  const Int8Linear int8 = QuantizeRows(*layer);
  ASSERT_EQ(int8.weight.scalar_type(), torch::kChar);
  ASSERT_EQ(int8.weight.sizes(), layer->weight.sizes());
  const torch::Tensor rounded = int8.weight.to(torch::kFloat) * int8.scales.unsqueeze(1);
  EXPECT_TRUE(torch::all((rounded - layer->weight).abs() <= int8.scales.unsqueeze(1) * 0.5 + 1e-7)
                  .item<bool>());
  EXPECT_EQ(int8.weight.abs().amax(1)[0].item<int>(), 127);
  EXPECT_EQ(int8.weight.abs().amax(1)[8].item<int>(), 127);
  EXPECT_TRUE(torch::all(rounded[4] == 0).item<bool>());
  for (const int64_t rows : {1, 3, 16, 40}) {
    const torch::Tensor x = torch::randn({rows, 1, 48});
    const torch::Tensor got = ApplyLinear(int8, x);
    ASSERT_EQ(got.sizes(), torch::IntArrayRef({rows, 1, 9}));
    EXPECT_LT(MaxAbsDifference(got, torch::linear(x, rounded, layer->bias)), 1e-4) << rows;
  }
  EXPECT_THROW(ApplyLinear(int8, torch::randn({1, 47})), c10::Error);
  EXPECT_THROW(ApplyLinear(int8, torch::randn({1, 48}, torch::kDouble)), c10::Error);
}

}  // namespace
}  // namespace vidclf::model
