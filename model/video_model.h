// A loaded model bundle: ResNet18 frame embedder plus temporal head, ready for inference.
#ifndef VIDCLF_MODEL_VIDEO_MODEL_H_
#define VIDCLF_MODEL_VIDEO_MODEL_H_

#include <torch/torch.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/fused_resnet18.h"
#include "model/heads/step_graph.h"
#include "model/heads/temporal_head.h"
#include "model/inference_options.h"
#include "model/int8_calibration.h"
#include "model/model_config.h"
#include "model/precision_choice.h"
#include "model/resnet18.h"

namespace vidclf::model {

// Thread-safe after construction: inference only reads the weights, so any number of threads may
// call Embed and Classify at once.
class VideoModel {
 public:
  // Builds a model with freshly initialised weights (from the global torch RNG) for `config`: by
  // default exactly as defined, to be trained and saved.
  static absl::StatusOr<std::unique_ptr<VideoModel>> Create(
      const ModelConfig& config, const InferenceOptions& options = InferenceOptions::Exact());

  // Loads REPO/<name>/<version>/ (see model_config.h), by default as the server runs it. Errors
  // name the file and what is wrong.
  static absl::StatusOr<std::unique_ptr<VideoModel>> Load(const std::string& bundle_dir,
                                                          const InferenceOptions& options = {});

  // Writes model.json and the weights into `bundle_dir`, creating it.
  absl::Status Save(const std::string& bundle_dir) const;

  const ModelConfig& config() const { return config_; }
  torch::Device device() const { return device_; }
  // Whether the backbone runs channels-last: frames prepared in that layout are used as they are.
  bool channels_last() const { return channels_last_; }
  // Whether StreamStep continues the head's state exactly at a constant cost per frame (the GRU;
  // a transformer with causal-linear attention); otherwise it re-runs a sliding window.
  bool has_recurrent_step() const { return head_->has_recurrent_step(); }
  ModelConfig& mutable_config() { return config_; }
  // The eager backbone, to read or change its weights. Throws c10::Error when fused.
  ResNet18& backbone();
  // Whether live streams' one-frame steps run int8 weights (StepWeights::kInt8 asked for, and the
  // head has such a step).
  bool int8_step_weights() const { return int8_step_weights_; }
  // The precision the backbone runs in: InferenceOptions::precision as asked, or what
  // Precision::kAuto chose for the bundle, and why.
  const PrecisionChoice& precision() const { return precision_; }
  // Whether the backbone runs fused (BackboneKernels::kFused or kWinograd).
  bool fused_backbone() const { return fused_backbone_ != nullptr; }
  // Whether its 3x3 convolutions run oneDNN's Winograd kernels (BackboneKernels::kWinograd, where
  // they run).
  bool winograd_backbone() const { return fused_backbone_ && fused_backbone_->uses_winograd(); }
  // Models with the same key embed frames with one backbone, the same way (a shared fused
  // backbone, FusedResNet18::Shared): their frames of one size may be embedded in one batch.
  const void* backbone_key() const {
    return fused_backbone_ ? static_cast<const void*>(fused_backbone_.get()) : this;
  }
  // The temporal head (GRU or transformer, as the config says).
  TemporalHead& head() { return *head_; }
  // The head that runs `attention` (see Classify): head() for "", else a substitution's.
  absl::StatusOr<TemporalHead*> HeadFor(absl::string_view attention) const;

  // frames: [T, 3, crop, crop] float, on any device. Returns embeddings [T, 512] float on the
  // model's device: a GPU's stay there for the heads, which send only their answers back, and may
  // still be being computed when Embed returns (reading them waits). Runs in eval mode without
  // autograd, in chunks of at most `max_batch_frames` frames to bound peak memory. Out of device
  // memory is RESOURCE_EXHAUSTED, any other failure INVALID_ARGUMENT.
  absl::StatusOr<torch::Tensor> Embed(const torch::Tensor& frames,
                                      int64_t max_batch_frames = 32) const;

  // embeddings: [B, T, 512]; lengths: [B]. Returns class probabilities [B, C] (softmax) on the
  // CPU. `attention` names a substitution the bundle allows (ModelConfig's
  // transformer.attention_substitutions), or is empty for the model's own mechanism; anything else
  // is INVALID_ARGUMENT.
  absl::StatusOr<torch::Tensor> Classify(const torch::Tensor& embeddings,
                                         const torch::Tensor& lengths,
                                         absl::string_view attention = "") const;

  // A segmentation model's answer for every frame of one video (TemporalHead::forward_frames):
  // embeddings [T, 512] in, probabilities [T, C] (softmax) on the CPU out. Errors as Classify's.
  absl::StatusOr<torch::Tensor> ClassifyFrames(const torch::Tensor& embeddings,
                                               absl::string_view attention = "") const;

  // OK when Classify accepts `attention`; otherwise the error Classify would return.
  absl::Status CheckAttention(absl::string_view attention) const;

  // Streams frames into the head (heads/head_stream.h; the sliding window is `window`, or the
  // config's when unset): embeddings [B, T, 512] are the next frames of B streams whose earlier
  // frames produced `state`. Returns the current probabilities [B, C] on the CPU and the next
  // state. Each stream's state belongs to one caller at a time. `attention` as for Classify.
  absl::StatusOr<std::pair<torch::Tensor, HeadState>> StreamStep(
      const torch::Tensor& embeddings, const HeadState& state, absl::string_view attention = "",
      const std::optional<SlidingWindowOptions>& window = std::nullopt) const;

  // StreamStep for B streams that each carry their own state, whose frames seen may differ
  // (heads/head_stream.h's StepHeadEach): embeddings [B, T, 512], states[b] stream b's, of one
  // stream or fresh. A head with a recurrent step steps them in one pass over its weights, which
  // costs little more than one stream's step. Returns the probabilities [B, C] on the CPU and each
  // stream's next state. Errors as StreamStep's.
  absl::StatusOr<std::pair<torch::Tensor, std::vector<HeadState>>> StreamStepEach(
      const torch::Tensor& embeddings, const std::vector<HeadState>& states,
      absl::string_view attention = "",
      const std::optional<SlidingWindowOptions>& window = std::nullopt) const;

  // Whether StreamStep with `attention` continues the state exactly at a constant cost per frame
  // (see has_recurrent_step); errors as Classify's for an attention the bundle does not allow.
  absl::StatusOr<bool> HasRecurrentStep(absl::string_view attention) const;

 private:
  VideoModel(ModelConfig config, ResNet18 backbone, std::shared_ptr<TemporalHead> head,
             torch::Device device, torch::Dtype backbone_dtype, bool channels_last);
  // Puts the weights on the device in the layout asked for, fuses the backbone when asked, builds
  // the substitution heads, and gives the heads int8 step weights when asked. With `int8`, the
  // fused backbone runs int8 by that calibration. Throws c10::Error.
  void Prepare(const InferenceOptions& options,
               const std::optional<Int8Calibration>& int8 = std::nullopt);

  ModelConfig config_;
  torch::Device device_;
  torch::Dtype backbone_dtype_;
  bool channels_last_;
  bool int8_step_weights_ = false;
  PrecisionChoice precision_;
  // LibTorch's forward() is not const, but in eval mode under InferenceMode it only reads.
  mutable ResNet18 backbone_;
  // Set instead of backbone_ when the backbone is fused; shared with models of the same weights.
  std::shared_ptr<const FusedResNet18> fused_backbone_;
  std::shared_ptr<TemporalHead> head_;
  // One head per allowed attention substitution, sharing head_'s parameter storage.
  std::map<std::string, std::shared_ptr<TemporalHead>> substitutes_;
#ifdef VIDCLF_TORCH_CUDA
  // The captured single-stream step of each head (head_ and substitutes_) that has one.
  std::map<const TemporalHead*, std::unique_ptr<TransformerStepGraph>> step_graphs_;
#endif
};

}  // namespace vidclf::model

#endif  // VIDCLF_MODEL_VIDEO_MODEL_H_
