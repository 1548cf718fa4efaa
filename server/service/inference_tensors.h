// The Open Inference Protocol's ModelInfer in vidclf's terms: a request's input tensor and
// parameters as a vidclf.v1 request, and a vidclf.v1 answer as the protocol's output tensors.
// Every way a request can be malformed is INVALID_ARGUMENT naming the input, output or
// parameter at fault and what was expected, so that a user of a generic client can fix it.
#ifndef VIDCLF_SERVER_SERVICE_INFERENCE_TENSORS_H_
#define VIDCLF_SERVER_SERVICE_INFERENCE_TENSORS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "inference/grpc_service.pb.h"
#include "vidclf/v1/video_classifier.pb.h"

namespace vidclf::service {

// The tensors' names.
inline constexpr char kVideoInput[] = "VIDEO";
inline constexpr char kUriInput[] = "URI";
inline constexpr char kLabelsOutput[] = "LABELS";
inline constexpr char kScoresOutput[] = "SCORES";
inline constexpr char kFrameTimesOutput[] = "FRAME_TIMES";

struct InferRequestParts {
  // The model, top_k, sampling and attention, and the uri when the input is URI; its video is
  // left unset, as the bytes stay where they arrived (video()).
  vidclf::v1::ClassifyRequest settings;
  // The outputs to answer, in the order the response lists them.
  std::vector<std::string> outputs;

  // The encoded video of a VIDEO input: a view into the request it was parsed from, or into
  // the copy made of UINT8 contents. Valid while both live.
  absl::string_view video() const { return copied_video.empty() ? video_view : copied_video; }
  absl::string_view video_view;
  std::string copied_video;
};

// `request` must outlive the result's video().
absl::StatusOr<InferRequestParts> ParseInferRequest(const inference::ModelInferRequest& request);

// The answer to `request` (its id echoed), `outputs` in raw_output_contents, and the stage
// timings as response parameters (decode_ms, preprocess_ms, embed_ms, head_ms, queue_ms,
// total_ms, as vidclf.v1's StageTimings).
inference::ModelInferResponse InferResponseOf(const inference::ModelInferRequest& request,
                                              const std::vector<std::string>& outputs,
                                              const vidclf::v1::ClassifyResponse& answer);

// Every served model's inputs and outputs, for ModelMetadata and ModelConfig.
void AddTensorMetadata(inference::ModelMetadataResponse* metadata);
void AddTensorConfig(inference::ModelConfig* config);

}  // namespace vidclf::service

#endif  // VIDCLF_SERVER_SERVICE_INFERENCE_TENSORS_H_
