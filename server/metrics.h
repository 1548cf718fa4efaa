// Prometheus metrics of the server, in base units and with bounded label values: the RPC
// boundary records requests, the engine reports through the EngineObserver interface, and
// gauges are read from the engine at each scrape.
#ifndef VIDCLF_SERVER_METRICS_H_
#define VIDCLF_SERVER_METRICS_H_

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/engine/classify_engine.h"
#include "server/engine/engine_observer.h"
#include "server/sources/mqtt_publisher.h"
#include "server/sources/source_registry.h"

namespace vidclf {

// One model's whole-video calls (Classify, ClassifyUpload, ModelInfer) since the server started,
// as the Open Inference Protocol's ModelStatistics reports them. Stage times are summed over the
// calls that succeeded.
struct InferenceTotals {
  int64_t successes = 0, failures = 0;
  double success_seconds = 0, failure_seconds = 0;
  double queue_seconds = 0;
  double input_seconds = 0;    // decoding and converting the frames
  double compute_seconds = 0;  // the backbone and the head
  absl::Time last_success = absl::InfinitePast();
};

// Thread-safe.
class ServerMetrics : public engine::EngineObserver {
 public:
  // Registers the families in `registry`.
  explicit ServerMetrics(prometheus::Registry& registry);

  // One finished RPC. `model` must be a served model's name (or "unknown"), never text a client
  // chose, so that the label's values stay bounded. `code` is a status code name ("OK", ...).
  void RecordRequest(absl::string_view method, absl::string_view model, absl::string_view code,
                     double seconds);

  // One finished whole-video call of `model` (a served model's name, or "unknown") that took
  // `seconds`: `result` when it succeeded, null when it failed.
  void RecordInference(absl::string_view model, double seconds,
                       const engine::ClassifyResult* result);
  // Zeros for a model with no call yet.
  InferenceTotals InferenceTotalsOf(absl::string_view model) const;

  // engine::EngineObserver.
  void StageDone(absl::string_view model, engine::Stage stage, double seconds) override;
  void BatchDone(int frames) override;
  void FramesDecoded(int64_t frames) override;
  // Counts the clip by device, and a fallback by reason, logging the first of each reason.
  void ClipDecoded(absl::string_view device, absl::string_view gpu_fallback) override;
  void FramesEmbedded(int64_t frames) override;
  void Refused(engine::Refusal refusal) override;
  void StreamFrames(int64_t frames) override;
  void HeadStepped(int streams) override;
  void StreamFrameTimed(const engine::StreamFrameTimes& times) override;
  void SourceReconnect() override;
  void StreamSegmentEvent(absl::string_view model, absl::string_view label, bool start) override;
  // Counts every failure, and logs the first as a warning: a server that lost its binding is
  // slower (model/thread_affinity.h), which an operator should hear of without a dashboard.
  void ThreadBindingFailed(const absl::Status& why) override;

  // A stream prediction was handed to gRPC `latency_seconds` after its newest frame arrived.
  void RecordStreamUpdate(double latency_seconds);
  // Stream predictions dropped for a client that did not read in time.
  void RecordDroppedPredictions(int64_t predictions);

 private:
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& request_duration_;
  prometheus::Family<prometheus::Histogram>& stage_duration_;
  prometheus::Histogram& batch_frames_;
  prometheus::Counter& frames_decoded_;
  prometheus::Family<prometheus::Counter>& decoded_clips_;
  prometheus::Family<prometheus::Counter>& decode_fallbacks_;
  absl::Mutex fallbacks_logged_mutex_;
  std::set<std::string> fallbacks_logged_ ABSL_GUARDED_BY(fallbacks_logged_mutex_);
  prometheus::Counter& frames_embedded_;
  prometheus::Family<prometheus::Counter>& refused_;
  prometheus::Counter& stream_frames_;
  prometheus::Histogram& stream_head_step_streams_;
  prometheus::Histogram& stream_update_latency_;
  prometheus::Family<prometheus::Histogram>& stream_frame_stages_;
  prometheus::Histogram& stream_frame_decode_;
  prometheus::Histogram& stream_frame_convert_;
  prometheus::Histogram& stream_frame_wait_;
  prometheus::Histogram& stream_frame_embed_;
  prometheus::Histogram& stream_frame_head_;
  prometheus::Counter& stream_dropped_predictions_;
  prometheus::Counter& source_reconnects_;
  prometheus::Family<prometheus::Counter>& stream_events_;
  prometheus::Counter& thread_binding_failures_;
  std::once_flag thread_binding_warned_;
  mutable absl::Mutex inference_totals_mutex_;
  std::map<std::string, InferenceTotals, std::less<>> inference_totals_
      ABSL_GUARDED_BY(inference_totals_mutex_);
};

// Reads the engine's gauges at each scrape: vidclf_queue_depth{stage},
// vidclf_active_streams{model}, vidclf_inflight_requests, vidclf_inflight_bytes,
// vidclf_model_info{model,version,head,attention}, and with CUDA vidclf_device_memory_bytes{device,
// kind} and vidclf_nvdec_sessions{device}. `engine` must outlive it.
std::shared_ptr<prometheus::Collectable> MakeEngineCollector(const engine::ClassifyEngine* engine);

// Reads the registered sources at each scrape: vidclf_sources{state} for all of them, and for
// the first `per_source_limit` by id (so that a label's values stay bounded however many are
// registered) vidclf_source_state{source,state} (1), vidclf_source_frames_total{source},
// vidclf_registered_source_reconnects_total{source}, vidclf_source_frames_per_second{source} and
// vidclf_source_lag_seconds{source}; vidclf_source_metrics_omitted counts the sources left out.
// `registry` must outlive it.
std::shared_ptr<prometheus::Collectable> MakeSourcesCollector(
    const sources::SourceRegistry* registry, int per_source_limit);

// Reads the MQTT publisher's figures at each scrape: vidclf_mqtt_connected,
// vidclf_mqtt_published_total and vidclf_mqtt_dropped_total{kind="prediction"|"event"}.
// `publisher` must outlive it.
std::shared_ptr<prometheus::Collectable> MakeMqttCollector(const sources::MqttPublisher* publisher);

// Reports this process's resident and virtual memory, CPU time, start time and file descriptors
// (process_resident_memory_bytes, process_open_fds, ...) from /proc at each scrape, as
// Prometheus's own clients do.
std::shared_ptr<prometheus::Collectable> MakeProcessCollector();

// Reads vidclf_internal_errors_total{where} (server/internal_errors.h) at each scrape: every
// place, zeros included, so that an alert on it needs no absent().
std::shared_ptr<prometheus::Collectable> MakeInternalErrorsCollector();

}  // namespace vidclf

#endif  // VIDCLF_SERVER_METRICS_H_
