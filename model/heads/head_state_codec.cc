#include "model/heads/head_state_codec.h"

#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/json_text.h"

namespace vidclf::model {

std::string EncodeHeadState(const HeadState& state) {
  std::vector<torch::Tensor> tensors = {torch::tensor(state.frames_seen, torch::kInt64)};
  for (const torch::Tensor& tensor : state.tensors) {
    tensors.push_back(tensor.defined() ? tensor.detach().to(torch::kCPU).contiguous()
                                       : torch::Tensor());
  }
  std::ostringstream bytes;
  torch::save(tensors, bytes);
  return bytes.str();
}

absl::StatusOr<HeadState> DecodeHeadState(absl::string_view bytes, const torch::Device& device) {
  std::vector<torch::Tensor> tensors;
  try {
    std::istringstream in{std::string(bytes)};
    torch::load(tensors, in);
  } catch (const c10::Error& error) {
    return absl::InvalidArgumentError("the head state is not one EncodeHeadState wrote");
  }
  if (tensors.empty() || tensors.front().dim() != 0 ||
      tensors.front().scalar_type() != torch::kInt64) {
    return absl::InvalidArgumentError("the head state has no frame count");
  }
  HeadState state;
  state.frames_seen = tensors.front().item<int64_t>();
  for (size_t i = 1; i < tensors.size(); ++i) {
    state.tensors.push_back(tensors[i].defined() ? tensors[i].to(device) : torch::Tensor());
  }
  return state;
}

std::string HeadStateFingerprint(const ModelConfig& config, absl::string_view attention) {
  nlohmann::json json = ModelConfigToJson(config);
  json.erase("metrics");
  json.erase("provenance");
  json["stream_attention"] = std::string(attention);
  return JsonText(json);
}

}  // namespace vidclf::model
