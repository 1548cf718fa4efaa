// A stream's head state (heads/temporal_head.h) as bytes, so that a live stream can be
// checkpointed and resumed after a restart: the GRU's hidden state, causal-linear attention's
// sums, a sliding window's embeddings. The bytes say nothing of the model they came from; a
// fingerprint of it travels beside them and is compared before a state is given to a head.
#ifndef VIDCLF_MODEL_HEADS_HEAD_STATE_CODEC_H_
#define VIDCLF_MODEL_HEADS_HEAD_STATE_CODEC_H_

#include <torch/torch.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/heads/temporal_head.h"
#include "model/model_config.h"

namespace vidclf::model {

// LibTorch's own serialization of the state's tensors (moved to the CPU) and frame count.
std::string EncodeHeadState(const HeadState& state);
// The state EncodeHeadState wrote, its tensors on `device`; INVALID_ARGUMENT for other bytes.
absl::StatusOr<HeadState> DecodeHeadState(absl::string_view bytes, const torch::Device& device);

// What a state depends on: the bundle's name and version, its labels, its head's type and
// hyper-parameters, its streaming window and the attention it runs with (`attention`, or its
// own when empty). Two models with equal fingerprints can continue each other's states.
std::string HeadStateFingerprint(const ModelConfig& config, absl::string_view attention);

}  // namespace vidclf::model

#endif  // VIDCLF_MODEL_HEADS_HEAD_STATE_CODEC_H_
