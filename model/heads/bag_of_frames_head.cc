#include "model/heads/bag_of_frames_head.h"

namespace vidclf::model {

BagOfFramesHeadImpl::BagOfFramesHeadImpl(int64_t input_size, int64_t num_classes)
    : TemporalHead(input_size) {
  TORCH_CHECK(num_classes >= 1, "bag-of-frames head needs at least one class");
  classifier = register_module("classifier", torch::nn::Linear(input_size, num_classes));
}

torch::Tensor BagOfFramesHeadImpl::forward(const torch::Tensor& embeddings,
                                           const torch::Tensor& lengths) {
  const torch::Tensor x = CheckAndStandardise(embeddings, lengths, "bag-of-frames head");
  const torch::Tensor valid_lengths = lengths.to(torch::kLong).to(x.device());
  const torch::Tensor mask =
      (torch::arange(x.size(1), valid_lengths.options()).unsqueeze(0) < valid_lengths.unsqueeze(1))
          .to(x.dtype())
          .unsqueeze(2);  // [B, T, 1]
  return classifier((x * mask).sum(1) / mask.sum(1));
}

torch::Tensor BagOfFramesHeadImpl::forward_frames(const torch::Tensor& embeddings,
                                                  const torch::Tensor& lengths) {
  const torch::Tensor x = CheckAndStandardise(embeddings, lengths, "bag-of-frames head");
  const torch::Tensor counts = torch::arange(1, x.size(1) + 1, x.options()).view({1, -1, 1});
  return classifier(x.cumsum(1) / counts);
}

std::pair<torch::Tensor, HeadState> BagOfFramesHeadImpl::step(const torch::Tensor& embeddings,
                                                              const HeadState& state) {
  const StepInput input = PrepareStep(embeddings, state, "bag-of-frames head");
  torch::Tensor sum = input.x.sum(1);
  if (!input.own.empty()) {
    TORCH_CHECK(input.own.size() == 1 && input.own[0].sizes() == sum.sizes(),
                "bag-of-frames head state must hold one sum shaped ", sum.sizes());
    sum = sum + input.own[0];
  }
  HeadState next = NextState(state, input.x.size(1), {sum}, input);
  return {classifier(sum / static_cast<double>(next.frames_seen)), std::move(next)};
}

}  // namespace vidclf::model
