// Prometheus metrics of the server, recorded at the RPC boundary with bounded label values.
#ifndef VIDCLF_SERVER_METRICS_H_
#define VIDCLF_SERVER_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>

#include "absl/strings/string_view.h"

namespace vidclf {

// Thread-safe.
class ServerMetrics {
 public:
  // Registers the families in `registry`.
  explicit ServerMetrics(prometheus::Registry& registry);

  // One finished RPC. `model` must be a served model's name (or "unknown"), never text a client
  // chose, so that the label's values stay bounded. `code` is a status code name ("OK", ...).
  void RecordRequest(absl::string_view method, absl::string_view model, absl::string_view code,
                     double seconds);

  // Time one request spent in a stage ("decode", "preprocess", "embed", "head").
  void RecordStage(absl::string_view model, absl::string_view stage, double seconds);

 private:
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& request_duration_;
  prometheus::Family<prometheus::Histogram>& stage_duration_;
};

// A collectable that reports this process's resident and virtual memory, CPU time and start time
// (process_resident_memory_bytes, ...) from /proc at each scrape, as Prometheus's own clients do.
std::shared_ptr<prometheus::Collectable> MakeProcessCollector();

}  // namespace vidclf

#endif  // VIDCLF_SERVER_METRICS_H_
