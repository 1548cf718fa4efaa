#include "model/heads/gru_head.h"

namespace vidclf::model {

GruHeadImpl::GruHeadImpl(const GruHeadOptions& options_) : options(options_) {
  TORCH_CHECK(options.num_classes() >= 1, "GRU head needs at least one class; got ",
              options.num_classes());
  embedding_mean = register_buffer("embedding_mean", torch::zeros({options.input_size()}));
  embedding_std = register_buffer("embedding_std", torch::ones({options.input_size()}));
  gru = register_module(
      "gru", torch::nn::GRU(torch::nn::GRUOptions(options.input_size(), options.hidden_size())
                                .num_layers(options.num_layers())
                                .batch_first(true)));
  fc1 = register_module("fc1", torch::nn::Linear(options.hidden_size(), options.mlp_hidden_size()));
  fc2 = register_module("fc2", torch::nn::Linear(options.mlp_hidden_size(), options.num_classes()));
}

torch::Tensor GruHeadImpl::forward(const torch::Tensor& embeddings, const torch::Tensor& lengths) {
  TORCH_CHECK(embeddings.dim() == 3 && embeddings.size(2) == options.input_size(),
              "GRU head expects embeddings shaped [B, T, ", options.input_size(), "]; got ",
              embeddings.sizes());
  TORCH_CHECK(lengths.dim() == 1 && lengths.size(0) == embeddings.size(0),
              "GRU head expects one length per sequence; got lengths ", lengths.sizes(),
              " for embeddings ", embeddings.sizes());
  const torch::Tensor last = lengths.to(torch::kLong).to(embeddings.device()) - 1;
  TORCH_CHECK(last.min().item<int64_t>() >= 0 && last.max().item<int64_t>() < embeddings.size(1),
              "GRU head lengths must lie in [1, ", embeddings.size(1), "]");
  const torch::Tensor x = (embeddings - embedding_mean) / embedding_std;
  // The GRU runs left to right, so padding after a sequence's end cannot reach its last valid
  // output: take that step's output rather than the final hidden state.
  const torch::Tensor outputs = std::get<0>(gru->forward(x));  // [B, T, hidden]
  const torch::Tensor index = last.view({-1, 1, 1}).expand({-1, 1, outputs.size(2)});
  const torch::Tensor final_state = outputs.gather(1, index).squeeze(1);
  return fc2(torch::relu(fc1(final_state)));
}

}  // namespace vidclf::model
