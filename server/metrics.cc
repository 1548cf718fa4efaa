#include "server/metrics.h"

#include <prometheus/metric_family.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace vidclf {
namespace {

// Seconds, from 1 ms to ~65 s: a request spans tiny clips to long uploads on a slow CPU.
prometheus::Histogram::BucketBoundaries LatencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 65};
}

prometheus::MetricFamily Gauge(const std::string& name, const std::string& help, double value,
                               prometheus::MetricType type = prometheus::MetricType::Gauge) {
  prometheus::MetricFamily family;
  family.name = name;
  family.help = help;
  family.type = type;
  prometheus::ClientMetric metric;
  if (type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  family.metric.push_back(metric);
  return family;
}

class ProcessCollector : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override {
    // Fields of /proc/self/stat after the command name: state is field 3, utime 14, stime 15,
    // starttime 22, vsize 23, rss 24 (in pages).
    std::ifstream stat_file("/proc/self/stat");
    std::string stat((std::istreambuf_iterator<char>(stat_file)), {});
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));
    std::vector<std::string> field{"", "", ""};  // fields 1-2 were before the state
    for (std::string value; fields >> value;) field.push_back(value);
    if (field.size() < 25) return {};
    const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
    const double page_bytes = static_cast<double>(sysconf(_SC_PAGESIZE));
    const double cpu_seconds = (std::stod(field[14]) + std::stod(field[15])) / ticks;
    return {
        Gauge("process_resident_memory_bytes", "Resident memory size in bytes.",
              std::stod(field[24]) * page_bytes),
        Gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.",
              std::stod(field[23])),
        Gauge("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
              cpu_seconds, prometheus::MetricType::Counter),
        Gauge("process_start_time_seconds",
              "Start time of the process since unix epoch in seconds.",
              BootTimeSeconds() + std::stod(field[22]) / ticks),
    };
  }

 private:
  static double BootTimeSeconds() {
    std::ifstream stat("/proc/stat");
    for (std::string key; stat >> key;) {
      if (key == "btime") {
        double seconds = 0;
        stat >> seconds;
        return seconds;
      }
    }
    return 0;
  }
};

}  // namespace

ServerMetrics::ServerMetrics(prometheus::Registry& registry)
    : requests_(prometheus::BuildCounter()
                    .Name("vidclf_requests_total")
                    .Help("RPCs finished, by method, model and gRPC status code.")
                    .Register(registry)),
      request_duration_(prometheus::BuildHistogram()
                            .Name("vidclf_request_duration_seconds")
                            .Help("Wall-clock time from receiving an RPC to its status.")
                            .Register(registry)),
      stage_duration_(prometheus::BuildHistogram()
                          .Name("vidclf_stage_duration_seconds")
                          .Help("Time a successful request spent in each pipeline stage.")
                          .Register(registry)) {}

void ServerMetrics::RecordRequest(absl::string_view method, absl::string_view model,
                                  absl::string_view code, double seconds) {
  const prometheus::Labels labels{
      {"method", std::string(method)}, {"model", std::string(model)}, {"code", std::string(code)}};
  requests_.Add(labels).Increment();
  request_duration_
      .Add({{"method", std::string(method)}, {"model", std::string(model)}}, LatencyBuckets())
      .Observe(seconds);
}

void ServerMetrics::RecordStage(absl::string_view model, absl::string_view stage, double seconds) {
  stage_duration_
      .Add({{"model", std::string(model)}, {"stage", std::string(stage)}}, LatencyBuckets())
      .Observe(seconds);
}

std::shared_ptr<prometheus::Collectable> MakeProcessCollector() {
  return std::make_shared<ProcessCollector>();
}

}  // namespace vidclf
