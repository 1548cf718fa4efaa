// A loaded model bundle: ResNet18 frame embedder plus temporal head, ready for inference.
#ifndef VIDCLF_MODEL_VIDEO_MODEL_H_
#define VIDCLF_MODEL_VIDEO_MODEL_H_

#include <torch/torch.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "model/heads/temporal_head.h"
#include "model/model_config.h"
#include "model/resnet18.h"

namespace vidclf::model {

// Thread-safe after construction: inference only reads the weights, so any number of threads may
// call Embed and Classify at once.
class VideoModel {
 public:
  // Builds a model with freshly initialised weights (from the global torch RNG) for `config`.
  static absl::StatusOr<std::unique_ptr<VideoModel>> Create(const ModelConfig& config);

  // Loads REPO/<name>/<version>/ (see model_config.h). Errors name the file and what is wrong.
  static absl::StatusOr<std::unique_ptr<VideoModel>> Load(const std::string& bundle_dir);

  // Writes model.json and the weights into `bundle_dir`, creating it.
  absl::Status Save(const std::string& bundle_dir) const;

  const ModelConfig& config() const { return config_; }
  ModelConfig& mutable_config() { return config_; }
  ResNet18& backbone() { return backbone_; }
  // The temporal head (GRU or transformer, as the config says).
  TemporalHead& head() { return *head_; }

  // frames: [T, 3, crop, crop] float. Returns embeddings [T, 512]. Runs in eval mode without
  // autograd, in chunks of at most `max_batch_frames` frames to bound peak memory.
  absl::StatusOr<torch::Tensor> Embed(const torch::Tensor& frames,
                                      int64_t max_batch_frames = 32) const;

  // embeddings: [B, T, 512]; lengths: [B]. Returns class probabilities [B, C] (softmax).
  absl::StatusOr<torch::Tensor> Classify(const torch::Tensor& embeddings,
                                         const torch::Tensor& lengths) const;

 private:
  VideoModel(ModelConfig config, ResNet18 backbone, std::shared_ptr<TemporalHead> head);

  ModelConfig config_;
  // LibTorch's forward() is not const, but in eval mode under InferenceMode it only reads.
  mutable ResNet18 backbone_;
  std::shared_ptr<TemporalHead> head_;
};

// Sets `threads` intra-op threads for LibTorch and returns a line naming the BLAS and thread count
// in use, for the start-up log.
std::string ConfigureTorchThreads(int threads);

}  // namespace vidclf::model

#endif  // VIDCLF_MODEL_VIDEO_MODEL_H_
