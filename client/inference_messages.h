// The Open Inference Protocol's messages as the client makes and reads them: vidclf.v1's
// settings as ModelInfer's request parameters and VIDEO tensor, and the protocol's answers read
// back into vidclf.v1's messages, so that the subcommands print both protocols alike.
#ifndef VIDCLF_CLIENT_INFERENCE_MESSAGES_H_
#define VIDCLF_CLIENT_INFERENCE_MESSAGES_H_

#include <grpcpp/grpcpp.h>

#include <string>

#include "absl/strings/string_view.h"
#include "inference/grpc_service.pb.h"
#include "vidclf/v1/video_classifier.pb.h"

namespace vidclf::client {

// The parameter `name` of `request`, made when absent.
inference::InferParameter& Parameter(inference::ModelInferRequest* request,
                                     const std::string& name);

// A BYTES tensor of one element, as raw contents: its length as 4 little-endian bytes, then it.
std::string OneBytesElement(absl::string_view element);

// `request`'s video (or URI) as the VIDEO (or URI) input and its settings as the request
// parameters, only those it sets.
inference::ModelInferRequest ToModelInfer(const vidclf::v1::ClassifyRequest& request);

// ModelInfer's answer as Classify's: LABELS, SCORES, FRAME_TIMES and the timing parameters.
vidclf::v1::ClassifyResponse FromModelInfer(const inference::ModelInferResponse& infer);

// Marks `request` as the start of a ModelStreamInfer sequence with `config`'s head and emit
// options as its parameters (the options it sets only).
void AddSequenceStart(const vidclf::v1::StreamConfig& config,
                      inference::ModelInferRequest* request);

// A ModelStreamInfer prediction as StreamClassify's.
vidclf::v1::StreamPrediction StreamPredictionOf(const inference::ModelInferResponse& infer);

// A ModelStreamInfer error_message ("CODE: why") as a status of that code.
grpc::Status StatusOfStreamError(const std::string& error_message);

}  // namespace vidclf::client

#endif  // VIDCLF_CLIENT_INFERENCE_MESSAGES_H_
