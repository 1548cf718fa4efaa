#include "model/video_model.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json_text.h"
#include "model/heads/bag_of_frames_head.h"
#include "model/heads/gru_head.h"
#include "model/heads/head_stream.h"
#include "model/heads/transformer_head.h"

namespace vidclf::model {
namespace {

constexpr char kConfigFile[] = "model.json";
constexpr char kBackboneFile[] = "backbone.pt";
constexpr char kHeadFile[] = "head.pt";

// Throws c10::Error when the head's options are inconsistent.
std::shared_ptr<TemporalHead> MakeHeadOfType(const ModelConfig& config) {
  const auto num_classes = static_cast<int64_t>(config.labels.size());
  if (config.head == HeadType::kTransformer) {
    const TransformerHeadConfig& t = config.transformer;
    return TransformerHead(TransformerHeadOptions(num_classes)
                               .input_size(kResNet18EmbeddingSize)
                               .d_model(t.d_model)
                               .num_heads(t.num_heads)
                               .num_layers(t.num_layers)
                               .ffn_size(t.ffn_size)
                               .pre_norm(t.pre_norm)
                               .pooling(t.pooling)
                               .positional_encoding(t.positional_encoding)
                               .dropout(t.dropout)
                               .attention(t.attention))
        .ptr();
  }
  if (config.head == HeadType::kBagOfFrames) {
    return BagOfFramesHead(kResNet18EmbeddingSize, num_classes).ptr();
  }
  return GruHead(GruHeadOptions(num_classes)
                     .input_size(kResNet18EmbeddingSize)
                     .hidden_size(config.gru.hidden_size)
                     .num_layers(config.gru.num_layers)
                     .mlp_hidden_size(config.gru.mlp_hidden_size)
                     .input_dropout(config.gru.input_dropout))
      .ptr();
}

std::shared_ptr<TemporalHead> MakeHead(const ModelConfig& config) {
  std::shared_ptr<TemporalHead> head = MakeHeadOfType(config);
  head->set_frame_differences(config.frame_differences);
  return head;
}

// torch::load replaces each tensor wholesale, shape included, so a file written for another
// configuration would load silently; compare every shape against the freshly built module.
template <typename Module>
absl::Status LoadWeights(Module& module, const std::filesystem::path& path) {
  std::map<std::string, std::vector<int64_t>> expected;
  for (const auto& item : module->named_parameters())
    expected[item.key()] = item.value().sizes().vec();
  for (const auto& item : module->named_buffers())
    expected[item.key()] = item.value().sizes().vec();
  torch::load(module, path.string());
  auto check = [&](const auto& items) -> absl::Status {
    for (const auto& item : items) {
      const std::vector<int64_t> shape = item.value().sizes().vec();
      if (shape != expected[item.key()]) {
        return absl::InvalidArgumentError(
            absl::StrCat("cannot load the weights in ", path.string(), ": ", item.key(),
                         " has shape [", absl::StrJoin(shape, ", "), "] but model.json implies [",
                         absl::StrJoin(expected[item.key()], ", "), "]"));
      }
    }
    return absl::OkStatus();
  };
  if (auto status = check(module->named_parameters()); !status.ok()) return status;
  return check(module->named_buffers());
}

// Moves floating-point tensors to `dtype` and every tensor to `device`; 4-d ones (convolution
// weights) to channels-last when asked. Integer buffers (batch norm's num_batches_tracked) keep
// their type, which Module::to(dtype) would not.
void MoveWeights(torch::nn::Module& module, const torch::Device& device, torch::Dtype dtype,
                 bool channels_last) {
  torch::NoGradGuard no_grad;
  auto move = [&](torch::Tensor& tensor) {
    torch::Tensor moved = tensor.is_floating_point() ? tensor.to(device, dtype) : tensor.to(device);
    if (channels_last && moved.dim() == 4) {
      moved = moved.contiguous(torch::MemoryFormat::ChannelsLast);
    }
    tensor.set_data(moved);
  };
  for (auto& item : module.named_parameters()) move(item.value());
  for (auto& item : module.named_buffers()) move(item.value());
}

}  // namespace

namespace {

struct ResolvedInference {
  torch::Device device;
  torch::Dtype dtype;  // of the backbone
};

// The int8 calibration of the bundle in `bundle_dir`, which `options` run in int8: where it has
// none, FAILED_PRECONDITION saying how to make one.
absl::StatusOr<Int8Calibration> Int8CalibrationOf(const std::string& bundle_dir,
                                                  const InferenceOptions& options) {
  if (options.backbone_kernels == BackboneKernels::kEager) {
    return absl::InvalidArgumentError(
        "precision int8 runs on the fused backbone's kernels, not the eager module's");
  }
  absl::StatusOr<Int8Calibration> calibration = ReadInt8Calibration(bundle_dir);
  if (absl::IsNotFound(calibration.status())) {
    return absl::FailedPreconditionError(absl::StrCat(
        bundle_dir, " has no int8 calibration (", kInt8CalibrationFile,
        "): run `vidclf-train calibrate --work WORK` on the work directory its run was trained "
        "in, then export the run again; or serve it in another precision"));
  }
  return calibration;
}

absl::StatusOr<ResolvedInference> ResolveInference(const InferenceOptions& options) {
  absl::StatusOr<torch::Device> device = ResolveDevice(options);
  if (!device.ok()) return device.status();
  absl::StatusOr<torch::Dtype> dtype = BackboneDtype(options.precision, *device);
  if (!dtype.ok()) return dtype.status();
  return ResolvedInference{*device, *dtype};
}

}  // namespace

VideoModel::VideoModel(ModelConfig config, ResNet18 backbone, std::shared_ptr<TemporalHead> head,
                       torch::Device device, torch::Dtype backbone_dtype, bool channels_last)
    : config_(std::move(config)),
      device_(device),
      backbone_dtype_(backbone_dtype),
      channels_last_(channels_last),
      backbone_(std::move(backbone)),
      head_(std::move(head)) {}

ResNet18& VideoModel::backbone() {
  TORCH_CHECK(!fused_backbone_, "model ", config_.name,
              " runs a fused backbone; its eager weights were released");
  return backbone_;
}

void VideoModel::Prepare(const InferenceOptions& options,
                         const std::optional<Int8Calibration>& int8) {
  if (options.backbone_kernels != BackboneKernels::kEager) {
    backbone_->eval();
    fused_backbone_ =
        FusedResNet18::Shared(backbone_, device_, backbone_dtype_, channels_last_,
                              options.backbone_kernels == BackboneKernels::kWinograd, int8);
    backbone_ = ResNet18(nullptr);
  } else {
    MoveWeights(*backbone_, device_, backbone_dtype_, channels_last_);
    backbone_->eval();
  }
  MoveWeights(*head_, device_, torch::kFloat, /*channels_last=*/false);
  // cuDNN runs a GRU from one contiguous weight buffer, which moving its weights one by one breaks
  // up: without this, every call would gather them again (and LibTorch warns each time).
  for (const auto& module : head_->modules()) {
    if (auto* gru = module->as<torch::nn::GRU>()) gru->flatten_parameters();
  }
  head_->eval();
  if (config_.head != HeadType::kTransformer) return;
  for (const std::string& type : config_.transformer.attention_substitutions) {
    ModelConfig substitute_config = config_;
    substitute_config.transformer.attention.type = type;
    std::shared_ptr<TemporalHead> substitute = MakeHead(substitute_config);
    // Share the trained weights rather than copy them: a substitution costs no memory.
    torch::NoGradGuard no_grad;
    const auto parameters = head_->named_parameters();
    const auto buffers = head_->named_buffers();
    for (auto& item : substitute->named_parameters()) item.value().set_data(parameters[item.key()]);
    for (auto& item : substitute->named_buffers()) item.value().set_data(buffers[item.key()]);
    substitute->eval();
    substitutes_[type] = std::move(substitute);
  }
  if (options.step_weights == StepWeights::kInt8 && device_.is_cpu()) {
    int8_step_weights_ = head_->UseInt8StepWeights();
    for (const auto& [type, substitute] : substitutes_) substitute->UseInt8StepWeights();
  }
#ifdef VIDCLF_TORCH_CUDA
  if (!device_.is_cuda() || !options.cuda_graph_step) return;
  std::vector<TemporalHead*> heads = {head_.get()};
  for (const auto& [type, substitute] : substitutes_) heads.push_back(substitute.get());
  for (TemporalHead* head : heads) {
    if (!head->has_recurrent_step()) continue;
    step_graphs_[head] = std::make_unique<TransformerStepGraph>(
        dynamic_cast<TransformerHeadImpl&>(*head), /*batch=*/1);
  }
#endif
}

absl::StatusOr<std::unique_ptr<VideoModel>> VideoModel::Create(const ModelConfig& config,
                                                               const InferenceOptions& options) {
  absl::StatusOr<ResolvedInference> inference = ResolveInference(options);
  if (!inference.ok()) return inference.status();
  if (options.precision == Precision::kInt8) {
    return absl::InvalidArgumentError(
        "precision int8 needs the activation ranges of a bundle's calibration (VideoModel::Load)");
  }
  if (auto status = ValidateModelConfig(config); !status.ok()) return status;
  try {
    std::unique_ptr<VideoModel> model(new VideoModel(config, ResNet18(), MakeHead(config),
                                                     inference->device, inference->dtype,
                                                     options.channels_last));
    model->precision_ = options.precision == Precision::kAuto
                            ? PrecisionChoice{Precision::kFp32, "fp32: no bundle to choose by"}
                            : PrecisionChoice{options.precision, ""};
    model->Prepare(options);
    return model;
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot build model: ", e.what_without_backtrace()));
  }
}

absl::StatusOr<std::unique_ptr<VideoModel>> VideoModel::Load(const std::string& bundle_dir,
                                                             const InferenceOptions& asked) {
  const std::filesystem::path dir(bundle_dir);
  std::ifstream config_stream(dir / kConfigFile);
  if (!config_stream) {
    return absl::NotFoundError(absl::StrCat("no ", kConfigFile, " in ", bundle_dir));
  }
  nlohmann::json json = nlohmann::json::parse(config_stream, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return absl::InvalidArgumentError(
        absl::StrCat((dir / kConfigFile).string(), " is not valid JSON"));
  }
  absl::StatusOr<ModelConfig> config = ModelConfigFromJson(json);
  if (!config.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(bundle_dir, ": ", config.status().message()));
  }
  InferenceOptions options = asked;
  PrecisionChoice precision{asked.precision, ""};
  if (asked.precision == Precision::kAuto) {
    absl::StatusOr<torch::Device> device = ResolveDevice(asked);
    if (!device.ok()) return device.status();
    precision =
        ChoosePrecision(*config, *device, std::filesystem::exists(dir / kInt8CalibrationFile));
    options.precision = precision.precision;
  }
  absl::StatusOr<ResolvedInference> inference = ResolveInference(options);
  if (!inference.ok()) return inference.status();
  std::optional<Int8Calibration> int8;
  if (options.precision == Precision::kInt8) {
    absl::StatusOr<Int8Calibration> calibration = Int8CalibrationOf(bundle_dir, options);
    if (!calibration.ok()) return calibration.status();
    int8 = *std::move(calibration);
  }
  ResNet18 backbone;
  std::shared_ptr<TemporalHead> head;
  try {
    head = MakeHead(*config);
    if (auto status = LoadWeights(backbone, dir / kBackboneFile); !status.ok()) return status;
    if (auto status = LoadWeights(head, dir / kHeadFile); !status.ok()) return status;
    std::unique_ptr<VideoModel> model(new VideoModel(*std::move(config), std::move(backbone),
                                                     std::move(head), inference->device,
                                                     inference->dtype, options.channels_last));
    model->precision_ = precision;
    model->Prepare(options, int8);
    return model;
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load the weights in ", bundle_dir, ": ", e.what_without_backtrace()));
  }
}

absl::Status VideoModel::Save(const std::string& bundle_dir) const {
  // mutable_config() may have changed it since Create or Load; never write what Load refuses.
  if (auto status = ValidateModelConfig(config_); !status.ok()) return status;
  if (!device_.is_cpu() || backbone_dtype_ != torch::kFloat || channels_last_ || fused_backbone_) {
    return absl::FailedPreconditionError(
        "only a model on the CPU in fp32 and NCHW layout, with its backbone not fused, can be "
        "saved as a bundle");
  }
  const std::filesystem::path dir(bundle_dir);
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create ", bundle_dir, ": ", error.message()));
  }
  try {
    torch::save(backbone_, (dir / kBackboneFile).string());
    torch::save(head_, (dir / kHeadFile).string());
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("cannot write the weights to ", bundle_dir, ": ", e.what_without_backtrace()));
  }
  std::ofstream config_stream(dir / kConfigFile);
  config_stream << JsonText(ModelConfigToJson(config_), 2) << "\n";
  if (!config_stream) {
    return absl::InternalError(absl::StrCat("cannot write ", (dir / kConfigFile).string()));
  }
  return absl::OkStatus();
}

absl::StatusOr<torch::Tensor> VideoModel::Embed(const torch::Tensor& frames,
                                                int64_t max_batch_frames) const {
  try {
    torch::InferenceMode inference;
    std::vector<torch::Tensor> chunks;
    for (const torch::Tensor& chunk : frames.split(max_batch_frames)) {
      // From pinned host memory the copy runs asynchronously and the GPU converts the precision
      // (LibTorch's pinned allocator keeps the memory until the copy has run); otherwise LibTorch
      // converts on the CPU first.
      torch::Tensor input = chunk.to(device_, backbone_dtype_, /*non_blocking=*/chunk.is_pinned());
      // The fused backbone lays out its input itself (oneDNN's own layout on the CPU).
      const torch::Tensor embeddings =
          fused_backbone_
              ? fused_backbone_->forward(input)
              : backbone_->forward(
                    channels_last_ ? input.contiguous(torch::MemoryFormat::ChannelsLast) : input);
      chunks.push_back(embeddings.to(torch::kFloat));
    }
    return torch::cat(chunks);
  } catch (const c10::OutOfMemoryError& e) {
    return absl::ResourceExhaustedError(
        absl::StrCat("out of device memory embedding frames: ", e.what_without_backtrace()));
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("frame embedding failed: ", e.what_without_backtrace()));
  }
}

absl::StatusOr<TemporalHead*> VideoModel::HeadFor(absl::string_view attention) const {
  if (attention.empty()) return head_.get();
  if (config_.head == HeadType::kTransformer && attention == config_.transformer.attention.type) {
    return head_.get();
  }
  if (const auto substitute = substitutes_.find(std::string(attention));
      substitute != substitutes_.end()) {
    return substitute->second.get();
  }
  if (config_.head != HeadType::kTransformer) {
    return absl::InvalidArgumentError(absl::StrCat("attention \"", attention,
                                                   "\" was asked for, but model ", config_.name,
                                                   " has a ", HeadTypeName(config_.head), " head"));
  }
  const std::vector<std::string>& allowed = config_.transformer.attention_substitutions;
  return absl::InvalidArgumentError(
      absl::StrCat("model ", config_.name, " (", config_.transformer.attention.type,
                   " attention) cannot run with attention \"", attention, "\"; its bundle allows ",
                   allowed.empty() ? "no substitution" : absl::StrJoin(allowed, ", ")));
}

absl::Status VideoModel::CheckAttention(absl::string_view attention) const {
  return HeadFor(attention).status();
}

absl::StatusOr<torch::Tensor> VideoModel::Classify(const torch::Tensor& embeddings,
                                                   const torch::Tensor& lengths,
                                                   absl::string_view attention) const {
  absl::StatusOr<TemporalHead*> head = HeadFor(attention);
  if (!head.ok()) return head.status();
  try {
    torch::InferenceMode inference;
    const torch::Tensor logits =
        (*head)->forward(embeddings.to(device_, torch::kFloat), lengths.to(device_));
    return torch::softmax(logits, /*dim=*/-1).to(torch::kCPU);
  } catch (const c10::OutOfMemoryError& e) {
    return absl::ResourceExhaustedError(
        absl::StrCat("out of device memory in the head: ", e.what_without_backtrace()));
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("classification head failed: ", e.what_without_backtrace()));
  }
}

absl::StatusOr<torch::Tensor> VideoModel::ClassifyFrames(const torch::Tensor& embeddings,
                                                         absl::string_view attention) const {
  absl::StatusOr<TemporalHead*> head = HeadFor(attention);
  if (!head.ok()) return head.status();
  try {
    torch::InferenceMode inference;
    const torch::Tensor frames = embeddings.to(device_, torch::kFloat).unsqueeze(0);
    const torch::Tensor lengths = torch::full({1}, frames.size(1), torch::kLong).to(device_);
    const torch::Tensor logits = (*head)->forward_frames(frames, lengths).squeeze(0);
    return torch::softmax(logits, /*dim=*/-1).to(torch::kCPU);
  } catch (const c10::OutOfMemoryError& e) {
    return absl::ResourceExhaustedError(
        absl::StrCat("out of device memory in the head: ", e.what_without_backtrace()));
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("classification head failed: ", e.what_without_backtrace()));
  }
}

absl::StatusOr<bool> VideoModel::HasRecurrentStep(absl::string_view attention) const {
  absl::StatusOr<TemporalHead*> head = HeadFor(attention);
  if (!head.ok()) return head.status();
  return (*head)->has_recurrent_step();
}

absl::StatusOr<std::pair<torch::Tensor, HeadState>> VideoModel::StreamStep(
    const torch::Tensor& embeddings, const HeadState& state, absl::string_view attention,
    const std::optional<SlidingWindowOptions>& window) const {
  absl::StatusOr<TemporalHead*> head = HeadFor(attention);
  if (!head.ok()) return head.status();
  try {
    torch::InferenceMode inference;
    const torch::Tensor frames = embeddings.to(device_, torch::kFloat);
#ifdef VIDCLF_TORCH_CUDA
    // A replay per frame: worth it for the few frames a live stream brings at a time. The eager
    // step takes many frames in one pass for about what 4 to 5 replays cost on an H100.
    constexpr int64_t kMostFramesToReplay = 4;
    if (auto graph = step_graphs_.find(*head); graph != step_graphs_.end() && frames.dim() == 3 &&
                                               frames.size(0) == 1 &&
                                               frames.size(1) <= kMostFramesToReplay) {
      auto [logits, next] = graph->second->Step(frames, state);
      return std::make_pair(torch::softmax(logits, /*dim=*/-1).to(torch::kCPU), std::move(next));
    }
#endif
    auto [logits, next] = StepHead(**head, window.value_or(config_.streaming), frames, state);
    return std::make_pair(torch::softmax(logits, /*dim=*/-1).to(torch::kCPU), std::move(next));
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("streaming head step failed: ", e.what_without_backtrace()));
  }
}

absl::StatusOr<std::pair<torch::Tensor, std::vector<HeadState>>> VideoModel::StreamStepEach(
    const torch::Tensor& embeddings, const std::vector<HeadState>& states,
    absl::string_view attention, const std::optional<SlidingWindowOptions>& window) const {
  if (states.size() == 1 && embeddings.dim() == 3 && embeddings.size(0) == 1) {
    // One stream: StreamStep, which may replay its CUDA graph.
    auto step = StreamStep(embeddings, states.front(), attention, window);
    if (!step.ok()) return step.status();
    return std::make_pair(std::move(step->first), std::vector<HeadState>{std::move(step->second)});
  }
  absl::StatusOr<TemporalHead*> head = HeadFor(attention);
  if (!head.ok()) return head.status();
  try {
    torch::InferenceMode inference;
    auto [logits, next] = StepHeadEach(**head, window.value_or(config_.streaming),
                                       embeddings.to(device_, torch::kFloat), states);
    return std::make_pair(torch::softmax(logits, /*dim=*/-1).to(torch::kCPU), std::move(next));
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("streaming head step failed: ", e.what_without_backtrace()));
  }
}

}  // namespace vidclf::model
