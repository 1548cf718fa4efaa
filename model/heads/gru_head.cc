#include "model/heads/gru_head.h"

namespace vidclf::model {

GruHeadImpl::GruHeadImpl(const GruHeadOptions& options_)
    : TemporalHead(options_.input_size()), options(options_) {
  TORCH_CHECK(options.num_classes() >= 1, "GRU head needs at least one class; got ",
              options.num_classes());
  TORCH_CHECK(options.input_dropout() >= 0 && options.input_dropout() < 1,
              "GRU head input dropout must lie in [0, 1); got ", options.input_dropout());
  gru = register_module(
      "gru", torch::nn::GRU(torch::nn::GRUOptions(options.input_size(), options.hidden_size())
                                .num_layers(options.num_layers())
                                .batch_first(true)));
  fc1 = register_module("fc1", torch::nn::Linear(options.hidden_size(), options.mlp_hidden_size()));
  fc2 = register_module("fc2", torch::nn::Linear(options.mlp_hidden_size(), options.num_classes()));
}

// Functional rather than a registered Dropout module: a module would become a submodule that
// bundles saved before this option lack, and loading them would fail.
torch::Tensor GruHeadImpl::DropInput(const torch::Tensor& x) const {
  if (!is_training() || options.input_dropout() == 0) return x;
  return torch::dropout(x, options.input_dropout(), /*train=*/true);
}

torch::Tensor GruHeadImpl::forward(const torch::Tensor& embeddings, const torch::Tensor& lengths) {
  const torch::Tensor x = CheckAndStandardise(embeddings, lengths, "GRU head");
  const torch::Tensor last = lengths.to(torch::kLong).to(embeddings.device()) - 1;
  // The GRU runs left to right, so padding after a sequence's end cannot reach its last valid
  // output: take that step's output rather than the final hidden state.
  const torch::Tensor outputs = std::get<0>(gru->forward(DropInput(x)));  // [B, T, hidden]
  const torch::Tensor index = last.view({-1, 1, 1}).expand({-1, 1, outputs.size(2)});
  const torch::Tensor final_state = outputs.gather(1, index).squeeze(1);
  return fc2(torch::relu(fc1(final_state)));
}

torch::Tensor GruHeadImpl::forward_frames(const torch::Tensor& embeddings,
                                          const torch::Tensor& lengths) {
  const torch::Tensor x = CheckAndStandardise(embeddings, lengths, "GRU head");
  const torch::Tensor outputs = std::get<0>(gru->forward(DropInput(x)));  // [B, T, hidden]
  return fc2(torch::relu(fc1(outputs)));
}

std::pair<torch::Tensor, HeadState> GruHeadImpl::step(const torch::Tensor& embeddings,
                                                      const HeadState& state) {
  const StepInput input = PrepareStep(embeddings, state, "GRU head");
  const torch::Tensor& x = input.x;
  std::tuple<torch::Tensor, torch::Tensor> result;
  if (input.own.empty()) {
    result = gru->forward(x);
  } else {
    const torch::Tensor& hidden = input.own.front();
    TORCH_CHECK(input.own.size() == 1 && hidden.dim() == 3 &&
                    hidden.size(0) == options.num_layers() && hidden.size(1) == x.size(0) &&
                    hidden.size(2) == options.hidden_size(),
                "GRU head state must be one hidden state [", options.num_layers(), ", ", x.size(0),
                ", ", options.hidden_size(), "] for this batch of ", x.size(0), " sequences");
    result = gru->forward(x, hidden);
  }
  const auto& [outputs, hidden] = result;
  const torch::Tensor logits = fc2(torch::relu(fc1(outputs.select(1, -1))));
  return {logits, NextState(state, x.size(1), {hidden}, input)};
}

std::pair<torch::Tensor, std::vector<HeadState>> GruHeadImpl::StepEach(
    const torch::Tensor& embeddings, const std::vector<HeadState>& states) {
  CheckOneStatePerSequence(embeddings, states, "GRU head");
  if (frame_differences()) {
    // Joined, a fresh state would count as a last frame of zeros.
    return StepEachAlone(embeddings, states,
                         [this](const torch::Tensor& frames, const HeadState& state) {
                           return step(frames, state);
                         });
  }
  auto [logits, next] =
      step(embeddings, HeadState{0, JoinStates(states, /*batch_dim=*/1, "GRU head")});
  return {logits, SplitStates(next.tensors, /*batch_dim=*/1, states, embeddings.size(1))};
}

}  // namespace vidclf::model
