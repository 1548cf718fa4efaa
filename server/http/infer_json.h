// The Open Inference Protocol's REST form of ModelInfer: a JSON request (with the binary-data
// extension, its tensors' bytes after the JSON) as the gRPC form's message, so that both doors
// share one parser (service/inference_tensors.h), and the gRPC form's answer as JSON.
#ifndef VIDCLF_SERVER_HTTP_INFER_JSON_H_
#define VIDCLF_SERVER_HTTP_INFER_JSON_H_

#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "inference/grpc_service.pb.h"
#include "server/http/http_server.h"

namespace vidclf::http {

struct JsonInferRequest {
  inference::ModelInferRequest request;
  // The outputs to answer in binary, after the JSON: those asked so, or all of them
  // (the request parameter binary_data_output).
  std::set<std::string> binary_outputs;
  bool all_outputs_binary = false;
};

// `body`, whose first `json_length` bytes are the JSON (all of it when negative: no
// Inference-Header-Content-Length). INVALID_ARGUMENT naming what is malformed.
absl::StatusOr<JsonInferRequest> ParseJsonInferRequest(absl::string_view body, int64_t json_length);

// `response` as JSON, the outputs asked in binary after it (with Inference-Header-Content-Length).
HttpResponse JsonInferResponse(const inference::ModelInferResponse& response,
                               const JsonInferRequest& asked);

}  // namespace vidclf::http

#endif  // VIDCLF_SERVER_HTTP_INFER_JSON_H_
