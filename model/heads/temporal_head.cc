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

void CheckOneStatePerSequence(const torch::Tensor& embeddings, const std::vector<HeadState>& states,
                              const char* who) {
  TORCH_CHECK(embeddings.dim() == 3 && embeddings.size(0) == static_cast<int64_t>(states.size()) &&
                  !states.empty(),
              who, " needs one state per sequence; got ", states.size(), " states for embeddings ",
              embeddings.sizes());
}

std::pair<torch::Tensor, std::vector<HeadState>> StepEachAlone(
    const torch::Tensor& embeddings, const std::vector<HeadState>& states,
    const std::function<std::pair<torch::Tensor, HeadState>(const torch::Tensor&,
                                                            const HeadState&)>& step_one) {
  CheckOneStatePerSequence(embeddings, states, "stepping each sequence alone");
  std::vector<torch::Tensor> logits;
  std::vector<HeadState> next;
  for (size_t b = 0; b < states.size(); ++b) {
    auto [sequence_logits, sequence_next] =
        step_one(embeddings.narrow(/*dim=*/0, static_cast<int64_t>(b), 1), states[b]);
    logits.push_back(std::move(sequence_logits));
    next.push_back(std::move(sequence_next));
  }
  return {torch::cat(logits), std::move(next)};
}

std::pair<torch::Tensor, std::vector<HeadState>> TemporalHead::StepEach(
    const torch::Tensor& embeddings, const std::vector<HeadState>& states) {
  return StepEachAlone(
      embeddings, states,
      [this](const torch::Tensor& frames, const HeadState& state) { return step(frames, state); });
}

std::vector<torch::Tensor> TemporalHead::JoinStates(const std::vector<HeadState>& states,
                                                    int64_t batch_dim, const char* head_name) {
  const HeadState* model = nullptr;  // the first state that is not fresh
  for (const HeadState& state : states) {
    if (state.tensors.empty()) continue;
    if (model == nullptr) model = &state;
    TORCH_CHECK(state.tensors.size() == model->tensors.size(), head_name,
                " states stepped together must hold as many tensors; got ", state.tensors.size(),
                " and ", model->tensors.size());
    for (size_t k = 0; k < state.tensors.size(); ++k) {
      const torch::Tensor& tensor = state.tensors[k];
      TORCH_CHECK(tensor.dim() > batch_dim && tensor.size(batch_dim) == 1 &&
                      tensor.sizes() == model->tensors[k].sizes(),
                  head_name, " steps states of one sequence each, alike in shape; got ",
                  tensor.sizes(), " and ", model->tensors[k].sizes());
    }
  }
  if (model == nullptr) return {};
  std::vector<torch::Tensor> joined;
  for (size_t k = 0; k < model->tensors.size(); ++k) {
    std::vector<torch::Tensor> parts;
    parts.reserve(states.size());
    for (const HeadState& state : states) {
      parts.push_back(state.tensors.empty() ? torch::zeros_like(model->tensors[k])
                                            : state.tensors[k]);
    }
    joined.push_back(torch::cat(parts, batch_dim));
  }
  return joined;
}

std::vector<HeadState> TemporalHead::SplitStates(const std::vector<torch::Tensor>& joined,
                                                 int64_t batch_dim,
                                                 const std::vector<HeadState>& before,
                                                 int64_t frames) {
  std::vector<HeadState> states(before.size());
  for (size_t b = 0; b < states.size(); ++b) {
    states[b].frames_seen = before[b].frames_seen + frames;
    for (const torch::Tensor& tensor : joined) {
      states[b].tensors.push_back(
          tensor.narrow(batch_dim, static_cast<int64_t>(b), 1).contiguous());
    }
  }
  return states;
}

torch::Tensor TemporalHead::CheckAndStandardise(const torch::Tensor& embeddings,
                                                const torch::Tensor& lengths,
                                                const char* head_name) const {
  torch::Tensor standardised = Standardised(embeddings, head_name);
  if (frame_differences_ && standardised.size(1) > 0) {
    // Padding after a sequence's last frame gets differences too; like padding, they change
    // nothing of it.
    const torch::Tensor before = torch::cat(
        {standardised.narrow(1, 0, 1), standardised.narrow(1, 0, standardised.size(1) - 1)},
        /*dim=*/1);
    standardised = standardised - before;
  }
  TORCH_CHECK(lengths.dim() == 1 && lengths.size(0) == embeddings.size(0), head_name,
              " expects one length per sequence; got lengths ", lengths.sizes(), " for embeddings ",
              embeddings.sizes());
  TORCH_CHECK(lengths.numel() == 0 || (lengths.min().item<int64_t>() >= 1 &&
                                       lengths.max().item<int64_t>() <= embeddings.size(1)),
              head_name, " lengths must lie in [1, ", embeddings.size(1), "]");
  return standardised;
}

TemporalHead::StepInput TemporalHead::PrepareStep(const torch::Tensor& embeddings,
                                                  const HeadState& state,
                                                  const char* head_name) const {
  StepInput input;
  input.x = Standardised(embeddings, head_name);
  TORCH_CHECK(input.x.size(1) >= 1, head_name, " step needs at least one new frame");
  input.own = state.tensors;
  if (!frame_differences_) return input;
  torch::Tensor before;
  if (state.tensors.empty()) {
    before = input.x.narrow(1, 0, 1);  // a fresh sequence's first frame has no change
  } else {
    const torch::Tensor& last = state.tensors.back();
    TORCH_CHECK(last.dim() == 3 && last.size(0) == 1 && last.size(1) == embeddings.size(0) &&
                    last.size(2) == input_size_,
                head_name,
                " over frame differences needs its state's last tensor to be the last "
                "frame seen [1, ",
                embeddings.size(0), ", ", input_size_, "]; got ", last.sizes());
    before = last.transpose(0, 1);  // [B, 1, input_size]
    input.own.pop_back();
  }
  input.last_frame = input.x.narrow(1, input.x.size(1) - 1, 1).transpose(0, 1).contiguous();
  input.x = input.x - torch::cat({before, input.x.narrow(1, 0, input.x.size(1) - 1)}, 1);
  return input;
}

HeadState TemporalHead::NextState(const HeadState& before, int64_t frames,
                                  std::vector<torch::Tensor> own, const StepInput& input) {
  if (input.last_frame.defined()) own.push_back(input.last_frame);
  return HeadState{before.frames_seen + frames, std::move(own)};
}

torch::Tensor TemporalHead::CheckAndStandardise(const torch::Tensor& embeddings,
                                                const char* head_name) const {
  TORCH_CHECK(!frame_differences_, head_name,
              " over frame differences has no step yet; stream it over a sliding window");
  return Standardised(embeddings, head_name);
}

torch::Tensor TemporalHead::Standardised(const torch::Tensor& embeddings,
                                         const char* head_name) const {
  TORCH_CHECK(embeddings.dim() == 3 && embeddings.size(2) == input_size_, head_name,
              " expects embeddings shaped [B, T, ", input_size_, "]; got ", embeddings.sizes());
  return (embeddings - embedding_mean) / embedding_std;
}

}  // namespace vidclf::model
