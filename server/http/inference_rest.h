// The Open Inference Protocol's HTTP/REST endpoints, and a plain upload for curl, on the same
// engine as the gRPC front doors (calls are submitted through service/classify_submission.h: the
// same admission, deadlines, limits and metrics):
//
//   GET  /v2                                   server metadata
//   GET  /v2/health/live, /v2/health/ready     200, or 503 while draining (ready)
//   POST /v2/repository/index                  the models served (Triton's repository index)
//   GET  /v2/models/NAME[/versions/V]          model metadata
//   GET  .../ready, .../config, .../stats      readiness, configuration, statistics
//   POST .../infer                             ModelInfer in JSON, or with the binary-data
//                                              extension (Inference-Header-Content-Length)
//   POST /v2/models/NAME/classify?top_k=3&...  the body is the video; vidclf.v1's answer in JSON
//
// Errors are {"error": MESSAGE} with the status code of the gRPC status they come from.
#ifndef VIDCLF_SERVER_HTTP_INFERENCE_REST_H_
#define VIDCLF_SERVER_HTTP_INFERENCE_REST_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "server/engine/classify_engine.h"
#include "server/http/http_server.h"
#include "server/metrics.h"
#include "server/service/classify_submission.h"

namespace vidclf::http {

class InferenceRest {
 public:
  // Both must outlive it.
  InferenceRest(engine::ClassifyEngine* engine, ServerMetrics* metrics)
      : engine_(engine), metrics_(metrics), submitter_(engine, metrics) {}

  // An http::Handler.
  void Handle(HttpRequest request, Responder respond) const;

  // The health checks, open to callers without a token.
  static bool IsHealthCheck(absl::string_view path);

 private:
  // A request about model `name` (version `version`, or the one served), `rest` the path after.
  void HandleModel(HttpRequest request, const std::string& name, const std::string& version,
                   const std::vector<std::string>& rest, Responder respond) const;
  void Infer(HttpRequest request, const std::string& name, const std::string& version,
             Responder respond) const;
  void Classify(HttpRequest request, const std::string& name, Responder respond) const;

  engine::ClassifyEngine* const engine_;
  ServerMetrics* const metrics_;
  const service::ClassifySubmitter submitter_;
};

}  // namespace vidclf::http

#endif  // VIDCLF_SERVER_HTTP_INFERENCE_REST_H_
