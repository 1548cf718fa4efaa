#include "model/heads/temporal_head.h"

namespace vidclf::model {

TemporalHead::TemporalHead(int64_t input_size) : input_size_(input_size) {
  embedding_mean = register_buffer("embedding_mean", torch::zeros({input_size}));
  embedding_std = register_buffer("embedding_std", torch::ones({input_size}));
}

std::pair<torch::Tensor, HeadState> TemporalHead::step(const torch::Tensor& /*embeddings*/,
                                                       const HeadState& /*state*/) {
  TORCH_CHECK(false, "this head has no recurrent step; stream it over a sliding window");
}

torch::Tensor TemporalHead::CheckAndStandardise(const torch::Tensor& embeddings,
                                                const torch::Tensor& lengths,
                                                const char* head_name) const {
  torch::Tensor standardised = CheckAndStandardise(embeddings, head_name);
  TORCH_CHECK(lengths.dim() == 1 && lengths.size(0) == embeddings.size(0), head_name,
              " expects one length per sequence; got lengths ", lengths.sizes(), " for embeddings ",
              embeddings.sizes());
  TORCH_CHECK(lengths.numel() == 0 || (lengths.min().item<int64_t>() >= 1 &&
                                       lengths.max().item<int64_t>() <= embeddings.size(1)),
              head_name, " lengths must lie in [1, ", embeddings.size(1), "]");
  return standardised;
}

torch::Tensor TemporalHead::CheckAndStandardise(const torch::Tensor& embeddings,
                                                const char* head_name) const {
  TORCH_CHECK(embeddings.dim() == 3 && embeddings.size(2) == input_size_, head_name,
              " expects embeddings shaped [B, T, ", input_size_, "]; got ", embeddings.sizes());
  return (embeddings - embedding_mean) / embedding_std;
}

}  // namespace vidclf::model
