#include "model/heads/transformer_head.h"

#include <cmath>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "model/attention/registry.h"
#include "model/heads/few_rows_linear.h"

namespace vidclf::model {

std::string PoolingName(Pooling pooling) {
  switch (pooling) {
    case Pooling::kCls:
      return "cls";
    case Pooling::kLast:
      return "last";
    case Pooling::kMean:
      break;
  }
  return "mean";
}

absl::StatusOr<Pooling> ParsePooling(absl::string_view name) {
  if (name == "mean") return Pooling::kMean;
  if (name == "cls") return Pooling::kCls;
  if (name == "last") return Pooling::kLast;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown pooling \"", name, "\"; known: mean, cls, last"));
}

namespace {

// The encodings [..., d_model] of `positions` (double, any shape): sines at even features, cosines
// at odd ones, computed in double so golden values hold to 1e-7.
torch::Tensor EncodePositions(const torch::Tensor& positions, int64_t d_model) {
  TORCH_CHECK(d_model % 2 == 0, "sinusoidal positions need an even d_model; got ", d_model);
  // 1 / 10000^(2i/d) for i = 0 .. d/2 - 1.
  const torch::Tensor frequency =
      torch::exp(torch::arange(0, d_model, 2, torch::kDouble) * (-std::log(10000.0) / d_model));
  const torch::Tensor angle = positions.unsqueeze(-1) * frequency;
  return torch::stack({torch::sin(angle), torch::cos(angle)}, /*dim=*/-1)
      .flatten(/*start_dim=*/-2)
      .to(torch::kFloat);
}

// norm(x + y), or norm(x) where y is undefined, for float32 rows on the CPU in one pass over each
// row: the one-frame step's residual sums and layer norms, which as tensor operations cost more in
// dispatch than in arithmetic. Equal to torch's layer norm up to float rounding.
torch::Tensor AddAndNormalise(const torch::nn::LayerNormImpl& norm, const torch::Tensor& x,
                              const torch::Tensor& y = {}) {
  const int64_t width = x.size(-1);
  const torch::Tensor xs = x.contiguous();
  const torch::Tensor ys = y.defined() ? y.contiguous() : y;
  const torch::Tensor weight = norm.weight.contiguous();
  const torch::Tensor bias = norm.bias.contiguous();
  torch::Tensor out = torch::empty_like(xs);
  const float* x_data = xs.data_ptr<float>();
  const float* y_data = ys.defined() ? ys.data_ptr<float>() : nullptr;
  const float* gamma = weight.data_ptr<float>();
  const float* beta = bias.data_ptr<float>();
  float* out_data = out.data_ptr<float>();
  const auto epsilon = static_cast<float>(norm.options.eps());
  for (int64_t row = 0; row < xs.numel() / width; ++row) {
    float* sum = out_data + row * width;
    const float* a = x_data + row * width;
    double total = 0;
    for (int64_t i = 0; i < width; ++i) {
      sum[i] = y_data == nullptr ? a[i] : a[i] + y_data[row * width + i];
      total += sum[i];
    }
    const auto mean = static_cast<float>(total / static_cast<double>(width));
    double squares = 0;
    for (int64_t i = 0; i < width; ++i) {
      const float centred = sum[i] - mean;
      squares += static_cast<double>(centred) * centred;
    }
    const auto scale = static_cast<float>(
        1.0 / std::sqrt(squares / static_cast<double>(width) + static_cast<double>(epsilon)));
    for (int64_t i = 0; i < width; ++i) sum[i] = (sum[i] - mean) * scale * gamma[i] + beta[i];
  }
  return out;
}

}  // namespace

torch::Tensor SinusoidalPositionalEncoding(int64_t length, int64_t d_model,
                                           int64_t first_position) {
  return EncodePositions(torch::arange(first_position, first_position + length, torch::kDouble),
                         d_model);
}

void StepLinears::AddInt8(const torch::nn::LinearImpl& layer) {
  int8_.insert_or_assign(&layer, QuantizeRows(layer));
}

torch::Tensor StepLinears::operator()(torch::nn::LinearImpl& layer, const torch::Tensor& x) const {
  const auto int8 = int8_.find(&layer);
  return int8 == int8_.end() ? ApplyLinear(layer, x) : ApplyLinear(int8->second, x);
}

SelfAttentionImpl::SelfAttentionImpl(int64_t d_model, int64_t num_heads_,
                                     std::shared_ptr<attention::AttentionMechanism> mechanism_)
    : num_heads(num_heads_),
      query(register_module("query", torch::nn::Linear(d_model, d_model))),
      key(register_module("key", torch::nn::Linear(d_model, d_model))),
      value(register_module("value", torch::nn::Linear(d_model, d_model))),
      output(register_module("output", torch::nn::Linear(d_model, d_model))),
      mechanism(register_module("mechanism", std::move(mechanism_))) {}

torch::Tensor SelfAttentionImpl::SplitHeads(const torch::Tensor& t) const {
  return t.view({t.size(0), t.size(1), num_heads, -1}).transpose(1, 2);  // [B, H, T, d/H]
}

torch::Tensor SelfAttentionImpl::MergeHeads(const torch::Tensor& mixed) {
  return ApplyLinear(*output, mixed.transpose(1, 2).reshape({mixed.size(0), mixed.size(2), -1}));
}

torch::Tensor SelfAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& mask) {
  return MergeHeads(
      mechanism->forward(SplitHeads(query(x)), SplitHeads(key(x)), SplitHeads(value(x)), mask));
}

std::pair<torch::Tensor, attention::AttentionState> SelfAttentionImpl::step(
    const torch::Tensor& x, const attention::AttentionState& state) {
  auto [mixed, next_state] =
      mechanism->forward_chunk(SplitHeads(ApplyLinear(*query, x)), SplitHeads(ApplyLinear(*key, x)),
                               SplitHeads(ApplyLinear(*value, x)), state);
  return {MergeHeads(mixed), std::move(next_state)};
}

std::pair<torch::Tensor, std::vector<attention::AttentionState>>
SelfAttentionImpl::StepOneFrameEach(const torch::Tensor& x,
                                    const std::vector<attention::AttentionState>& states,
                                    const StepLinears& linears) {
  const int64_t batch = x.size(0);
  auto [mixed, next_states] =
      mechanism->forward_one_frame_each(linears(*query, x).view({batch, num_heads, -1}),
                                        linears(*key, x).view({batch, num_heads, -1}),
                                        linears(*value, x).view({batch, num_heads, -1}), states);
  return {linears(*output, mixed.view({batch, 1, -1})), std::move(next_states)};
}

EncoderLayerImpl::EncoderLayerImpl(const TransformerHeadOptions& options,
                                   std::shared_ptr<attention::AttentionMechanism> mechanism)
    : pre_norm(options.pre_norm()),
      self_attention(register_module(
          "self_attention",
          SelfAttention(options.d_model(), options.num_heads(), std::move(mechanism)))),
      linear1(register_module("linear1", torch::nn::Linear(options.d_model(), options.ffn_size()))),
      linear2(register_module("linear2", torch::nn::Linear(options.ffn_size(), options.d_model()))),
      norm1(register_module(
          "norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({options.d_model()})))),
      norm2(register_module(
          "norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({options.d_model()})))),
      dropout(register_module("dropout", torch::nn::Dropout(options.dropout()))) {}

torch::Tensor EncoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& mask) {
  return AddSublayers(x, [&](const torch::Tensor& t) { return self_attention(t, mask); });
}

std::pair<torch::Tensor, attention::AttentionState> EncoderLayerImpl::step(
    const torch::Tensor& x, const attention::AttentionState& state) {
  attention::AttentionState next_state;
  const torch::Tensor y = AddSublayers(x, [&](const torch::Tensor& t) {
    torch::Tensor attended;
    std::tie(attended, next_state) = self_attention->step(t, state);
    return attended;
  });
  return {y, std::move(next_state)};
}

std::pair<torch::Tensor, std::vector<attention::AttentionState>> EncoderLayerImpl::StepOneFrameEach(
    const torch::Tensor& x, const std::vector<attention::AttentionState>& states,
    const StepLinears& linears) {
  std::vector<attention::AttentionState> next_states;
  auto attend = [&](const torch::Tensor& t) {
    torch::Tensor attended;
    std::tie(attended, next_states) = self_attention->StepOneFrameEach(t, states, linears);
    return attended;
  };
  // AddSublayers in eval mode, where dropout is the identity, with each residual sum and its norm
  // in one pass (AddAndNormalise); the sub-layers' outputs are fresh tensors, added to in place.
  auto feed_forward = [&](const torch::Tensor& t) {
    return linears(*linear2, linears(*linear1, t).relu_());
  };
  if (pre_norm) {
    const torch::Tensor z = attend(AddAndNormalise(*norm1, x)).add_(x);
    return {feed_forward(AddAndNormalise(*norm2, z)).add_(z), std::move(next_states)};
  }
  const torch::Tensor z = AddAndNormalise(*norm1, x, attend(x));
  return {AddAndNormalise(*norm2, z, feed_forward(z)), std::move(next_states)};
}

torch::Tensor EncoderLayerImpl::AddSublayers(
    const torch::Tensor& x, const std::function<torch::Tensor(const torch::Tensor&)>& attend) {
  auto feed_forward = [this](const torch::Tensor& t) {
    return ApplyLinear(*linear2, dropout(torch::relu(ApplyLinear(*linear1, t))));
  };
  if (pre_norm) {
    const torch::Tensor z = x + dropout(attend(norm1(x)));
    return z + dropout(feed_forward(norm2(z)));
  }
  const torch::Tensor z = norm1(x + dropout(attend(x)));
  return norm2(z + dropout(feed_forward(z)));
}

TransformerHeadImpl::TransformerHeadImpl(const TransformerHeadOptions& options_)
    : TemporalHead(options_.input_size()), options(options_) {
  TORCH_CHECK(options.num_classes() >= 1, "transformer head needs at least one class");
  TORCH_CHECK(options.d_model() >= 2 && options.d_model() % 2 == 0,
              "transformer d_model must be even (sinusoidal positions); got ", options.d_model());
  TORCH_CHECK(options.num_heads() >= 1 && options.d_model() % options.num_heads() == 0,
              "transformer num_heads must divide d_model; got ", options.num_heads(), " and ",
              options.d_model());
  TORCH_CHECK(options.num_layers() >= 1 && options.ffn_size() >= 1,
              "transformer num_layers and ffn_size must be positive");
  const absl::StatusOr<const attention::AttentionSpec*> spec =
      attention::FindAttention(options.attention().type);
  TORCH_CHECK(spec.ok(), std::string(spec.status().message()));
  TORCH_CHECK(
      !(attention::IsCausal(**spec, options.attention()) && options.pooling() == Pooling::kCls),
      "a class token placed first cannot see the frames through causal attention; use "
      "\"mean\" or \"last\" pooling with ",
      options.attention().type);
  if (options.input_size() != options.d_model()) {
    input_projection = register_module("input_projection",
                                       torch::nn::Linear(options.input_size(), options.d_model()));
  }
  if (options.pooling() == Pooling::kCls) {
    class_token = register_parameter("class_token", torch::randn({options.d_model()}) * 0.02);
  }
  attention::AttentionOptions attention = options.attention();
  attention.num_heads = options.num_heads();
  attention.head_dim = options.d_model() / options.num_heads();
  attention.value_dim = attention.head_dim;
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < options.num_layers(); ++i) {
    absl::StatusOr<std::shared_ptr<attention::AttentionMechanism>> mechanism =
        attention::MakeAttention(attention);
    TORCH_CHECK(mechanism.ok(), std::string(mechanism.status().message()));
    layers->push_back(EncoderLayer(options, *std::move(mechanism)));
  }
  if (options.pre_norm()) {
    final_norm = register_module(
        "final_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({options.d_model()})));
  }
  classifier =
      register_module("classifier", torch::nn::Linear(options.d_model(), options.num_classes()));
}

std::pair<torch::Tensor, torch::Tensor> TransformerHeadImpl::Encode(const torch::Tensor& embeddings,
                                                                    const torch::Tensor& lengths) {
  torch::Tensor x = CheckAndStandardise(embeddings, lengths, "transformer head");
  if (!input_projection.is_empty()) x = input_projection(x);
  const int64_t batch = x.size(0);
  const torch::Tensor valid_lengths = lengths.to(torch::kLong).to(x.device());
  torch::Tensor mask =
      torch::arange(x.size(1), valid_lengths.options()).unsqueeze(0) < valid_lengths.unsqueeze(1);
  if (class_token.defined()) {
    // First position: valid for any length. (Causal mechanisms are refused with class tokens.)
    x = torch::cat({class_token.view({1, 1, -1}).expand({batch, 1, -1}), x}, 1);
    mask = torch::cat({torch::ones({batch, 1}, mask.options()), mask}, 1);
  }
  if (options.positional_encoding()) {
    x = x + SinusoidalPositionalEncoding(x.size(1), options.d_model()).to(x.device(), x.dtype());
  }
  for (const auto& layer : *layers) x = layer->as<EncoderLayer>()->forward(x, mask);
  if (!final_norm.is_empty()) x = final_norm(x);
  return {x, mask};
}

torch::Tensor TransformerHeadImpl::forward(const torch::Tensor& embeddings,
                                           const torch::Tensor& lengths) {
  const auto [x, mask] = Encode(embeddings, lengths);
  torch::Tensor pooled;
  switch (options.pooling()) {
    case Pooling::kCls:
      pooled = x.select(1, 0);
      break;
    case Pooling::kLast: {
      const torch::Tensor last = lengths.to(torch::kLong).to(x.device()) - 1;
      pooled = x.gather(1, last.view({-1, 1, 1}).expand({-1, 1, x.size(2)})).squeeze(1);
      break;
    }
    case Pooling::kMean: {
      const torch::Tensor weights = mask.to(x.dtype()).unsqueeze(2);  // [B, T, 1]
      pooled = (x * weights).sum(1) / weights.sum(1);
      break;
    }
  }
  return classifier(pooled);
}

torch::Tensor TransformerHeadImpl::forward_frames(const torch::Tensor& embeddings,
                                                  const torch::Tensor& lengths) {
  auto [x, mask] = Encode(embeddings, lengths);
  if (class_token.defined()) x = x.narrow(1, 1, x.size(1) - 1);
  if (causal() && options.pooling() == Pooling::kMean) {
    // Each prefix's mean: padding comes after the valid frames, so it never enters one.
    const torch::Tensor counts = torch::arange(1, x.size(1) + 1, x.options()).view({1, -1, 1});
    x = x.cumsum(1) / counts;
  }
  return classifier(x);
}

bool TransformerHeadImpl::causal() const {
  for (const auto& layer : *layers) {
    if (!layer->as<EncoderLayer>()->self_attention->mechanism->has_recurrent_form()) return false;
  }
  return true;
}

std::pair<torch::Tensor, HeadState> TransformerHeadImpl::step(const torch::Tensor& embeddings,
                                                              const HeadState& state) {
  TORCH_CHECK(causal(), "a transformer head with ", options.attention().type,
              " attention has no recurrent step (its mechanism has no recurrent form); stream it "
              "over a sliding window");
  const torch::Tensor x = CheckAndStandardise(embeddings, "transformer head");
  TORCH_CHECK(x.size(1) >= 1, "transformer head step needs at least one new frame");
  torch::Tensor positions;
  if (options.positional_encoding()) {
    positions = SinusoidalPositionalEncoding(x.size(1), options.d_model(), state.frames_seen)
                    .to(x.device(), x.dtype());
  }
  if (x.size(0) == 1 && StepsOneFrameWrittenOut(x)) {
    auto [logits, next] = StepOneFrameEach(x, positions, {state});
    return {logits, std::move(next.front())};
  }
  const int64_t frames_seen = state.frames_seen + x.size(1);
  auto [logits, tensors] = StepStandardised(x, positions, state.tensors,
                                            torch::scalar_tensor(static_cast<double>(frames_seen)));
  return {logits, HeadState{frames_seen, std::move(tensors)}};
}

std::pair<torch::Tensor, std::vector<HeadState>> TransformerHeadImpl::StepEach(
    const torch::Tensor& embeddings, const std::vector<HeadState>& states) {
  if (!has_recurrent_step()) return TemporalHead::StepEach(embeddings, states);  // step() refuses
  CheckOneStatePerSequence(embeddings, states, "transformer head");
  const torch::Tensor x = CheckAndStandardise(embeddings, "transformer head");
  TORCH_CHECK(x.size(1) >= 1, "transformer head step needs at least one new frame");
  const int64_t frames = x.size(1);
  std::vector<int64_t> seen_before;
  for (const HeadState& state : states) seen_before.push_back(state.frames_seen);
  const torch::Tensor first = torch::tensor(seen_before, torch::kDouble).unsqueeze(1);  // [B, 1]
  torch::Tensor positions;  // [B, T, d_model]: each sequence continues from its own frames seen
  if (options.positional_encoding()) {
    positions = EncodePositions(first + torch::arange(frames, torch::kDouble), options.d_model())
                    .to(x.device(), x.dtype());
  }
  if (StepsOneFrameWrittenOut(x)) return StepOneFrameEach(x, positions, states);
  auto [logits, next] =
      StepStandardised(x, positions, JoinStates(states, /*batch_dim=*/0, "transformer head"),
                       (first + frames).to(x.device(), x.dtype()));
  return {logits, SplitStates(next, /*batch_dim=*/0, states, frames)};
}

bool TransformerHeadImpl::EveryLayerStepsOneFrame() const {
  for (const auto& layer : *layers) {
    if (!layer->as<EncoderLayer>()->self_attention->mechanism->has_one_frame_step()) return false;
  }
  return true;
}

bool TransformerHeadImpl::StepsOneFrameWrittenOut(const torch::Tensor& embeddings) const {
  return embeddings.dim() == 3 && embeddings.size(1) == 1 && embeddings.device().is_cpu() &&
         embeddings.scalar_type() == torch::kFloat && !torch::GradMode::is_enabled() &&
         !is_training() && EveryLayerStepsOneFrame();
}

bool TransformerHeadImpl::UseInt8StepWeights() {
  if (!EveryLayerStepsOneFrame()) return false;
  for (const auto& module : modules()) {
    if (const auto* linear = module->as<torch::nn::Linear>()) step_linears_.AddInt8(*linear);
  }
  return true;
}

std::pair<torch::Tensor, std::vector<HeadState>> TransformerHeadImpl::StepOneFrameEach(
    const torch::Tensor& standardised, const torch::Tensor& positions,
    const std::vector<HeadState>& states) {
  const auto num_layers = static_cast<size_t>(options.num_layers());
  std::vector<HeadState> next(states.size());
  for (size_t b = 0; b < states.size(); ++b) {
    // A state holds S and Z of each layer, then the running sum of the last layer's outputs.
    TORCH_CHECK(states[b].tensors.empty() || states[b].tensors.size() == 2 * num_layers + 1,
                "transformer head state must hold ", 2 * num_layers + 1, " tensors; got ",
                states[b].tensors.size());
    next[b].frames_seen = states[b].frames_seen + 1;
  }
  torch::Tensor x = standardised;
  if (!input_projection.is_empty()) x = step_linears_(*input_projection, x);
  if (positions.defined()) x = x + positions;
  for (size_t i = 0; i < num_layers; ++i) {
    std::vector<attention::AttentionState> layer_states(states.size());
    for (size_t b = 0; b < states.size(); ++b) {
      if (!states[b].tensors.empty()) {
        layer_states[b] = {states[b].tensors[2 * i], states[b].tensors[2 * i + 1]};
      }
    }
    auto [y, layer_next] =
        layers[i]->as<EncoderLayer>()->StepOneFrameEach(x, layer_states, step_linears_);
    x = y;
    for (size_t b = 0; b < states.size(); ++b) {
      next[b].tensors.push_back(std::move(layer_next[b].s));
      next[b].tensors.push_back(std::move(layer_next[b].z));
    }
  }
  if (!final_norm.is_empty()) x = AddAndNormalise(*final_norm, x);
  std::vector<torch::Tensor> sums;
  std::vector<double> frames_seen;
  for (size_t b = 0; b < states.size(); ++b) {
    torch::Tensor sum =
        PooledState(x.narrow(0, static_cast<int64_t>(b), 1),
                    states[b].tensors.empty() ? torch::Tensor() : states[b].tensors.back());
    next[b].tensors.push_back(sum);
    sums.push_back(std::move(sum));
    frames_seen.push_back(static_cast<double>(next[b].frames_seen));
  }
  torch::Tensor pooled = torch::cat(sums);
  if (options.pooling() == Pooling::kMean) {
    pooled = pooled / torch::tensor(frames_seen, torch::kDouble).to(x.dtype()).unsqueeze(1);
  }
  return {step_linears_(*classifier, pooled), std::move(next)};
}

std::pair<torch::Tensor, std::vector<torch::Tensor>> TransformerHeadImpl::StepStandardised(
    const torch::Tensor& standardised, const torch::Tensor& positions,
    const std::vector<torch::Tensor>& state, const torch::Tensor& frames_seen) {
  const auto num_layers = static_cast<size_t>(options.num_layers());
  // state: S and Z of each layer, then the running sum of the last layer's outputs.
  TORCH_CHECK(state.empty() || state.size() == 2 * num_layers + 1,
              "transformer head state must hold ", 2 * num_layers + 1, " tensors; got ",
              state.size());
  torch::Tensor x = standardised;
  if (!input_projection.is_empty()) x = ApplyLinear(*input_projection, x);
  if (positions.defined()) x = x + positions;
  std::vector<torch::Tensor> next;
  for (size_t i = 0; i < num_layers; ++i) {
    attention::AttentionState layer_state;
    if (!state.empty()) layer_state = {state[2 * i], state[2 * i + 1]};
    auto [y, layer_next] = layers[i]->as<EncoderLayer>()->step(x, layer_state);
    x = y;
    next.push_back(layer_next.s);
    next.push_back(layer_next.z);
  }
  if (!final_norm.is_empty()) x = final_norm(x);
  torch::Tensor pooled = PooledState(x, state.empty() ? torch::Tensor() : state.back());
  next.push_back(pooled);
  if (options.pooling() == Pooling::kMean) pooled = pooled / frames_seen;
  return {ApplyLinear(*classifier, pooled), std::move(next)};
}

torch::Tensor TransformerHeadImpl::PooledState(const torch::Tensor& x,
                                               const torch::Tensor& before) const {
  // A copy: a view would keep every frame of x alive in the state.
  if (options.pooling() == Pooling::kLast) return x.select(1, -1).clone();
  torch::Tensor sum = x.sum(/*dim=*/1);
  if (!before.defined()) return sum;
  TORCH_CHECK(before.sizes() == sum.sizes(), "transformer head state's pooled sum has shape ",
              before.sizes(), "; this batch needs ", sum.sizes());
  return sum + before;
}

}  // namespace vidclf::model
