#include "server/service/inference_models.h"

#include "absl/strings/str_cat.h"
#include "media/quoted_text.h"
#include "server/service/inference_tensors.h"

namespace vidclf::service {
namespace {

inference::StatisticDuration Duration(int64_t count, double seconds) {
  inference::StatisticDuration duration;
  duration.set_count(static_cast<uint64_t>(count));
  duration.set_ns(static_cast<uint64_t>(seconds * 1e9));
  return duration;
}

}  // namespace

absl::StatusOr<const engine::ModelRepository::Entry*> FindServedModel(
    const engine::ModelRepository& repository, const std::string& name,
    const std::string& version) {
  absl::StatusOr<const engine::ModelRepository::Entry*> entry =
      repository.FindEntry(name.empty() ? repository.default_model() : name);
  if (!entry.ok() || version.empty()) return entry;
  if (absl::Status plain = media::CheckPlainText("model version", version); !plain.ok()) {
    return plain;
  }
  const model::ModelConfig& config = (*entry)->model->config();
  if (version != config.version) {
    return absl::NotFoundError(absl::StrCat("model ", config.name, " serves version ",
                                            config.version, ", not version ",
                                            media::QuoteInput(version)));
  }
  return entry;
}

inference::RepositoryIndexResponse RepositoryIndexOf(const engine::ModelRepository& repository) {
  inference::RepositoryIndexResponse index;
  for (const auto& [name, entry] : repository.entries()) {
    inference::RepositoryIndexResponse::ModelIndex* model = index.add_models();
    model->set_name(name);
    model->set_version(entry.model->config().version);
    model->set_state("READY");
  }
  return index;
}

inference::ModelMetadataResponse ModelMetadataOf(const engine::ModelRepository::Entry& entry) {
  const model::ModelConfig& config = entry.model->config();
  inference::ModelMetadataResponse metadata;
  metadata.set_name(config.name);
  metadata.add_versions(config.version);
  metadata.set_platform("vidclf");
  AddTensorMetadata(&metadata);
  return metadata;
}

inference::ModelConfig ModelConfigOf(const engine::ModelRepository::Entry& entry,
                                     absl::Duration max_queue_delay) {
  inference::ModelConfig config;
  config.set_name(entry.model->config().name);
  config.set_platform("vidclf");
  config.set_backend("vidclf");
  AddTensorConfig(&config);
  // Calls' frames are batched together on their way to the backbone.
  config.mutable_dynamic_batching()->set_max_queue_delay_microseconds(
      static_cast<uint64_t>(absl::ToInt64Microseconds(max_queue_delay)));
  // ModelInfer answers each request once; ModelStreamInfer's sequences answer as their feeds
  // go, as a decoupled model's do, but the configuration describes ModelInfer.
  config.mutable_model_transaction_policy()->set_decoupled(false);
  return config;
}

inference::ModelStatistics ModelStatisticsOf(const engine::ModelRepository::Entry& entry,
                                             const InferenceTotals& totals) {
  const model::ModelConfig& config = entry.model->config();
  inference::ModelStatistics statistics;
  statistics.set_name(config.name);
  statistics.set_version(config.version);
  if (totals.last_success != absl::InfinitePast()) {
    statistics.set_last_inference(static_cast<uint64_t>(absl::ToUnixMillis(totals.last_success)));
  }
  // One video a request, and one run of the head for it.
  statistics.set_inference_count(static_cast<uint64_t>(totals.successes));
  statistics.set_execution_count(static_cast<uint64_t>(totals.successes));
  inference::InferStatistics* stats = statistics.mutable_inference_stats();
  *stats->mutable_success() = Duration(totals.successes, totals.success_seconds);
  *stats->mutable_fail() = Duration(totals.failures, totals.failure_seconds);
  *stats->mutable_queue() = Duration(totals.successes, totals.queue_seconds);
  *stats->mutable_compute_input() = Duration(totals.successes, totals.input_seconds);
  *stats->mutable_compute_infer() = Duration(totals.successes, totals.compute_seconds);
  return statistics;
}

}  // namespace vidclf::service
