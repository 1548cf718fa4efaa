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
inline constexpr char kImageInput[] = "IMAGE";  // ModelStreamInfer's pictures
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

// The answer to the request `id`, `outputs` in raw_output_contents, and the stage timings as
// response parameters (decode_ms, preprocess_ms, embed_ms, head_ms, queue_ms, total_ms, as
// vidclf.v1's StageTimings).
inference::ModelInferResponse InferResponseOf(const std::string& id,
                                              const std::vector<std::string>& outputs,
                                              const vidclf::v1::ClassifyResponse& answer);

// One request of ModelStreamInfer: a step of one of the call's live feeds (sequences), as
// tritonclient's sequence parameters name them.
struct StreamRequestParts {
  // sequence_id as it came (int64, uint64 or string of at most 128 bytes), and as the key of
  // the call's feeds and the messages name it (a number, or the string quoted and escaped).
  inference::InferParameter sequence_id;
  std::string sequence;
  bool start = false;  // sequence_start: opens the feed with `config`
  bool end = false;    // sequence_end: the feed ends after this request's data
  // A start's model, attention, top_k, emit_every_frames, emit_every_seconds and embed_stride,
  // and its input kind: CONTAINER for VIDEO, ENCODED_IMAGES for IMAGE.
  vidclf::v1::StreamConfig config;
  // The request's data: a chunk of the container (VIDEO), one encoded picture (IMAGE, at
  // timestamp_seconds), or nothing (an end alone). A view into the request.
  enum class Data { kNone, kChunk, kPicture };
  Data data = Data::kNone;
  absl::string_view bytes;
  double timestamp_seconds = 0;
};

// `request` must outlive the result's bytes.
absl::StatusOr<StreamRequestParts> ParseStreamRequest(const inference::ModelInferRequest& request);

// A live feed's prediction as ModelStreamInfer answers it: LABELS and SCORES, `request_id` (the
// request that brought its newest frame), the sequence_id and the prediction's frames, times,
// latency_ms and dropped_before as parameters.
inference::ModelInferResponse StreamResponseOf(const vidclf::v1::StreamPrediction& prediction,
                                               const std::string& request_id,
                                               const inference::InferParameter& sequence_id);

// Every served model's inputs and outputs, for ModelMetadata and ModelConfig.
void AddTensorMetadata(inference::ModelMetadataResponse* metadata);
void AddTensorConfig(inference::ModelConfig* config);

}  // namespace vidclf::service

#endif  // VIDCLF_SERVER_SERVICE_INFERENCE_TENSORS_H_
