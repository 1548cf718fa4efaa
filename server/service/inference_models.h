// The served models in the Open Inference Protocol's terms, for both its front doors (gRPC and
// HTTP): which model and version a request names, the repository's index, and each model's
// metadata, configuration and statistics.
#ifndef VIDCLF_SERVER_SERVICE_INFERENCE_MODELS_H_
#define VIDCLF_SERVER_SERVICE_INFERENCE_MODELS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "inference/grpc_service.pb.h"
#include "server/engine/model_repository.h"
#include "server/metrics.h"

namespace vidclf::service {

// The model called `name` (the default model when empty) in `version` (the one served when
// empty): NOT_FOUND naming the version served when another is asked for.
absl::StatusOr<const engine::ModelRepository::Entry*> FindServedModel(
    const engine::ModelRepository& repository, const std::string& name, const std::string& version);

// Every model served, each READY.
inference::RepositoryIndexResponse RepositoryIndexOf(const engine::ModelRepository& repository);

inference::ModelMetadataResponse ModelMetadataOf(const engine::ModelRepository::Entry& entry);

// `max_queue_delay`: how long the backbone's batcher waits for more frames.
inference::ModelConfig ModelConfigOf(const engine::ModelRepository::Entry& entry,
                                     absl::Duration max_queue_delay);

inference::ModelStatistics ModelStatisticsOf(const engine::ModelRepository::Entry& entry,
                                             const InferenceTotals& totals);

}  // namespace vidclf::service

#endif  // VIDCLF_SERVER_SERVICE_INFERENCE_MODELS_H_
