#include "client/inference_messages.h"

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/tensor_bytes.h"

namespace vidclf::client {
namespace {

// The LABELS and SCORES outputs of `infer`, as ranked labels.
void AddTopK(const inference::ModelInferResponse& infer,
             google::protobuf::RepeatedPtrField<vidclf::v1::LabelScore>* top_k) {
  std::vector<std::string> labels;
  std::vector<float> scores;
  for (int i = 0; i < infer.outputs_size() && i < infer.raw_output_contents_size(); ++i) {
    if (infer.outputs(i).name() == "LABELS") labels = BytesElements(infer.raw_output_contents(i));
    if (infer.outputs(i).name() == "SCORES") scores = Fp32Elements(infer.raw_output_contents(i));
  }
  for (size_t i = 0; i < labels.size() && i < scores.size(); ++i) {
    vidclf::v1::LabelScore* entry = top_k->Add();
    entry->set_label(labels[i]);
    entry->set_score(scores[i]);
  }
}

}  // namespace

inference::InferParameter& Parameter(inference::ModelInferRequest* request,
                                     const std::string& name) {
  return (*request->mutable_parameters())[name];
}

std::string OneBytesElement(absl::string_view element) {
  std::string raw;
  AppendBytesElement(element, &raw);
  return raw;
}

inference::ModelInferRequest ToModelInfer(const vidclf::v1::ClassifyRequest& request) {
  inference::ModelInferRequest infer;
  infer.set_model_name(request.model());
  const bool uri = !request.uri().empty();
  inference::ModelInferRequest::InferInputTensor* input = infer.add_inputs();
  input->set_name(uri ? "URI" : "VIDEO");
  input->set_datatype("BYTES");
  input->add_shape(1);
  infer.add_raw_input_contents(OneBytesElement(uri ? request.uri() : request.video()));
  if (request.top_k() > 0) Parameter(&infer, "top_k").set_int64_param(request.top_k());
  const vidclf::v1::SamplingOptions& sampling = request.sampling();
  if (sampling.num_frames() > 0) {
    Parameter(&infer, "num_frames").set_int64_param(sampling.num_frames());
  }
  if (!sampling.strategy().empty()) {
    Parameter(&infer, "sampling").set_string_param(sampling.strategy());
  }
  if (sampling.frames_per_second() != 0) {
    Parameter(&infer, "frames_per_second").set_double_param(sampling.frames_per_second());
  }
  if (sampling.stride_frames() > 0) {
    Parameter(&infer, "stride_frames").set_int64_param(sampling.stride_frames());
  }
  if (sampling.start_seconds() != 0) {
    Parameter(&infer, "start_seconds").set_double_param(sampling.start_seconds());
  }
  if (sampling.snap_to_keyframes()) Parameter(&infer, "snap_to_keyframes").set_bool_param(true);
  if (sampling.skip_loop_filter()) Parameter(&infer, "skip_loop_filter").set_bool_param(true);
  if (!request.attention().empty()) {
    Parameter(&infer, "attention").set_string_param(request.attention());
  }
  return infer;
}

vidclf::v1::ClassifyResponse FromModelInfer(const inference::ModelInferResponse& infer) {
  vidclf::v1::ClassifyResponse response;
  response.set_model(infer.model_name());
  response.set_model_version(infer.model_version());
  AddTopK(infer, response.mutable_top_k());
  for (int i = 0; i < infer.outputs_size() && i < infer.raw_output_contents_size(); ++i) {
    if (infer.outputs(i).name() != "FRAME_TIMES") continue;
    for (float seconds : Fp32Elements(infer.raw_output_contents(i))) {
      response.add_frame_timestamps_seconds(seconds);
    }
  }
  response.set_frames_used(static_cast<uint32_t>(response.frame_timestamps_seconds_size()));
  auto milliseconds = [&](const char* name) {
    const auto found = infer.parameters().find(name);
    return found == infer.parameters().end() ? 0.0 : found->second.double_param();
  };
  vidclf::v1::StageTimings* timings = response.mutable_timings();
  timings->set_decode_ms(milliseconds("decode_ms"));
  timings->set_preprocess_ms(milliseconds("preprocess_ms"));
  timings->set_embed_ms(milliseconds("embed_ms"));
  timings->set_head_ms(milliseconds("head_ms"));
  timings->set_queue_ms(milliseconds("queue_ms"));
  timings->set_total_ms(milliseconds("total_ms"));
  return response;
}

void AddSequenceStart(const vidclf::v1::StreamConfig& config,
                      inference::ModelInferRequest* request) {
  Parameter(request, "sequence_start").set_bool_param(true);
  if (config.top_k() > 0) Parameter(request, "top_k").set_int64_param(config.top_k());
  if (config.emit_every_frames() > 0) {
    Parameter(request, "emit_every_frames").set_int64_param(config.emit_every_frames());
  }
  if (config.emit_every_seconds() > 0) {
    Parameter(request, "emit_every_seconds").set_double_param(config.emit_every_seconds());
  }
  if (config.embed_stride() > 0) {
    Parameter(request, "embed_stride").set_int64_param(config.embed_stride());
  }
  if (!config.attention().empty()) {
    Parameter(request, "attention").set_string_param(config.attention());
  }
}

vidclf::v1::StreamPrediction StreamPredictionOf(const inference::ModelInferResponse& infer) {
  vidclf::v1::StreamPrediction prediction;
  prediction.set_model(infer.model_name());
  prediction.set_model_version(infer.model_version());
  AddTopK(infer, prediction.mutable_top_k());
  auto parameter = [&](const char* name) {
    const auto found = infer.parameters().find(name);
    return found == infer.parameters().end() ? inference::InferParameter() : found->second;
  };
  prediction.set_first_frame(static_cast<uint64_t>(parameter("first_frame").int64_param()));
  prediction.set_last_frame(static_cast<uint64_t>(parameter("last_frame").int64_param()));
  prediction.set_first_seconds(parameter("first_seconds").double_param());
  prediction.set_last_seconds(parameter("last_seconds").double_param());
  prediction.set_frames_seen(static_cast<uint64_t>(parameter("frames_seen").int64_param()));
  prediction.set_frames_embedded(static_cast<uint64_t>(parameter("frames_embedded").int64_param()));
  prediction.set_latency_ms(parameter("latency_ms").double_param());
  prediction.set_dropped_before(static_cast<uint32_t>(parameter("dropped_before").int64_param()));
  return prediction;
}

grpc::Status StatusOfStreamError(const std::string& error_message) {
  // The server writes "CODE: why", or "sequence ID: CODE: why" for a sequence that failed.
  for (int code = 1; code <= 16; ++code) {
    const std::string name = absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
    if (error_message.find(name + ": ") != std::string::npos) {
      return grpc::Status(static_cast<grpc::StatusCode>(code), error_message);
    }
  }
  return grpc::Status(grpc::StatusCode::UNKNOWN, error_message);
}

}  // namespace vidclf::client
