#include "server/metrics.h"

#include <prometheus/metric_family.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "media/decoder_pool.h"
#include "media/nvdec_device.h"
#include "model/device_memory.h"
#include "server/internal_errors.h"

namespace vidclf {
namespace {

// Seconds, from 1 ms to ~65 s: a request spans tiny clips to long uploads on a slow CPU.
prometheus::Histogram::BucketBoundaries LatencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 65};
}

// Frames per backbone batch.
prometheus::Histogram::BucketBoundaries BatchBuckets() { return {1, 2, 4, 8, 16, 32, 64, 128}; }

// A family of one type, without samples yet.
prometheus::MetricFamily Family(const std::string& name, const std::string& help,
                                prometheus::MetricType type = prometheus::MetricType::Gauge) {
  prometheus::MetricFamily family;
  family.name = name;
  family.help = help;
  family.type = type;
  return family;
}

// Adds one sample with `labels` to a gauge or counter family.
void AddSample(prometheus::MetricFamily& family, double value,
               std::vector<prometheus::ClientMetric::Label> labels = {}) {
  prometheus::ClientMetric metric;
  metric.label = std::move(labels);
  if (family.type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  family.metric.push_back(std::move(metric));
}

prometheus::MetricFamily Gauge(const std::string& name, const std::string& help, double value,
                               prometheus::MetricType type = prometheus::MetricType::Gauge) {
  prometheus::MetricFamily family = Family(name, help, type);
  AddSample(family, value);
  return family;
}

class SourcesCollector : public prometheus::Collectable {
 public:
  SourcesCollector(const sources::SourceRegistry* registry, int per_source_limit)
      : registry_(registry), per_source_limit_(per_source_limit) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    using vidclf::v1::SourceStatus;
    const std::vector<vidclf::v1::Source> sources = registry_->Snapshot();
    prometheus::MetricFamily by_state =
        Family("vidclf_sources", "Registered sources (the Sources API), by state.");
    std::map<int, int> counts;
    for (const vidclf::v1::Source& source : sources) ++counts[source.status().state()];
    for (int state = SourceStatus::CONNECTING; state <= SourceStatus::PAUSED; ++state) {
      AddSample(by_state, counts[state],
                {{"state", SourceStatus::State_Name(static_cast<SourceStatus::State>(state))}});
    }
    prometheus::MetricFamily state =
        Family("vidclf_source_state", "Each source's state now (value 1), by source and state.");
    prometheus::MetricFamily frames = Family("vidclf_source_frames_total",
                                             "Frames decoded from each source, over every "
                                             "connection.",
                                             prometheus::MetricType::Counter);
    prometheus::MetricFamily reconnects =
        Family("vidclf_registered_source_reconnects_total",
               "Connections to each source after its first.", prometheus::MetricType::Counter);
    prometheus::MetricFamily fps = Family("vidclf_source_frames_per_second",
                                          "Frames per second from each source over the last 10 s.");
    prometheus::MetricFamily lag =
        Family("vidclf_source_lag_seconds",
               "From the arrival of the newest frame a source's latest prediction covers to that "
               "prediction.");
    const int shown = std::min<int>(per_source_limit_, static_cast<int>(sources.size()));
    for (int i = 0; i < shown; ++i) {
      const vidclf::v1::Source& source = sources[static_cast<size_t>(i)];
      const std::string id = source.name().substr(sizeof("sources/") - 1);
      AddSample(state, 1,
                {{"source", id}, {"state", SourceStatus::State_Name(source.status().state())}});
      AddSample(frames, static_cast<double>(source.status().frames()), {{"source", id}});
      AddSample(reconnects, source.status().reconnects(), {{"source", id}});
      AddSample(fps, source.status().frames_per_second(), {{"source", id}});
      AddSample(lag, source.status().lag_seconds(), {{"source", id}});
    }
    return {by_state,
            state,
            frames,
            reconnects,
            fps,
            lag,
            Gauge("vidclf_source_metrics_omitted",
                  "Sources past --source-metrics-limit, counted in vidclf_sources only.",
                  static_cast<double>(sources.size()) - shown)};
  }

 private:
  const sources::SourceRegistry* const registry_;
  const int per_source_limit_;
};

class MqttCollector : public prometheus::Collectable {
 public:
  explicit MqttCollector(const sources::MqttPublisher* publisher) : publisher_(publisher) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    const sources::MqttPublisher::Stats stats = publisher_->stats();
    prometheus::MetricFamily dropped =
        Family("vidclf_mqtt_dropped_total",
               "Updates not published: predictions while the broker was away or behind, events "
               "and state changes past --mqtt-max-queued.",
               prometheus::MetricType::Counter);
    AddSample(dropped, static_cast<double>(stats.dropped_predictions), {{"kind", "prediction"}});
    AddSample(dropped, static_cast<double>(stats.dropped_events), {{"kind", "event"}});
    return {Gauge("vidclf_mqtt_connected", "1 while connected to the MQTT broker.",
                  stats.connected ? 1 : 0),
            Gauge("vidclf_mqtt_published_total", "Messages handed to the MQTT broker.",
                  static_cast<double>(stats.published), prometheus::MetricType::Counter),
            dropped};
  }

 private:
  const sources::MqttPublisher* const publisher_;
};

class EngineCollector : public prometheus::Collectable {
 public:
  explicit EngineCollector(const engine::ClassifyEngine* engine) : engine_(engine) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    const engine::EngineLoad load = engine_->load();
    prometheus::MetricFamily queue =
        Family("vidclf_queue_depth",
               "Work waiting: calls for a decoding slot (stage=decode), frames for the backbone "
               "(stage=embed).");
    AddSample(queue, load.calls_waiting_to_decode, {{"stage", "decode"}});
    AddSample(queue, static_cast<double>(load.frames_waiting_for_backbone), {{"stage", "embed"}});
    prometheus::MetricFamily info =
        Family("vidclf_model_info",
               "The models served (value 1), with their version, head and backbone precision.");
    for (const auto& [name, entry] : engine_->repository()->entries()) {
      const model::ModelConfig& config = entry.model->config();
      AddSample(
          info, 1,
          {{"model", name},
           {"version", config.version},
           {"head", model::HeadTypeName(config.head)},
           {"attention",
            config.head == model::HeadType::kTransformer ? config.transformer.attention.type : ""},
           {"precision", model::PrecisionName(entry.model->precision().precision)}});
    }
    prometheus::MetricFamily streams = Family(
        "vidclf_active_streams",
        "Live streams and segments calls open (StreamClassify, WatchSource, ModelStreamInfer "
        "sequences, ClassifySegments), by model; model=\"unknown\": those whose config has not "
        "arrived yet.");
    for (const auto& [name, entry] : engine_->repository()->entries()) {
      const auto open = load.active_streams.find(name);
      AddSample(streams, open == load.active_streams.end() ? 0 : open->second, {{"model", name}});
    }
    for (const auto& [name, open] : load.active_streams) {  // a model a reload took away
      if (engine_->repository()->entries().count(name) == 0) {
        AddSample(streams, open, {{"model", name}});
      }
    }
    AddSample(streams, load.streams_awaiting_config, {{"model", "unknown"}});
    std::vector<prometheus::MetricFamily> families = {
        queue,
        streams,
        Gauge("vidclf_inflight_requests", "Calls admitted and not yet answered.",
              load.inflight_calls),
        Gauge("vidclf_inflight_bytes",
              "Bytes the calls in flight hold: payloads, uploads and decoded frames.",
              static_cast<double>(load.inflight_bytes)),
        info,
    };
    if (const media::NvdecDevice* nvdec = engine_->options().decode.nvdec; nvdec != nullptr) {
      prometheus::MetricFamily sessions =
          Family("vidclf_nvdec_sessions", "NVDEC decoders open, by GPU (--max-nvdec-sessions).");
      AddSample(sessions, nvdec->sessions_in_use(), {{"device", nvdec->name()}});
      families.push_back(sessions);
    }
    if (const media::DecoderPool* pool = engine_->options().decode.decoder_pool; pool != nullptr) {
      families.push_back(Gauge("vidclf_idle_decoders",
                               "Decoders kept set up between calls, waiting for one.",
                               pool->idle()));
      families.push_back(Gauge("vidclf_decoder_reuses_total",
                               "Calls that decoded with a decoder kept from an earlier call.",
                               static_cast<double>(pool->reuses()),
                               prometheus::MetricType::Counter));
    }
    const std::vector<model::DeviceMemory> devices = model::CudaMemoryInUse();
    if (!devices.empty()) {
      prometheus::MetricFamily memory = Family(
          "vidclf_device_memory_bytes", "Accelerator memory allocated and reserved by LibTorch.");
      for (const model::DeviceMemory& device : devices) {
        AddSample(memory, static_cast<double>(device.bytes),
                  {{"device", device.device}, {"kind", device.kind}});
      }
      families.push_back(memory);
    }
    return families;
  }

 private:
  const engine::ClassifyEngine* const engine_;
};

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
        Gauge("process_open_fds", "Number of open file descriptors.", OpenFileDescriptors()),
        Gauge("process_max_fds", "Maximum number of open file descriptors.", MaxFileDescriptors()),
    };
  }

 private:
  static double OpenFileDescriptors() {
    std::error_code error;
    double count = 0;
    for (std::filesystem::directory_iterator it("/proc/self/fd", error), end; !error && it != end;
         it.increment(error)) {
      ++count;
    }
    return count;
  }

  static double MaxFileDescriptors() {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
    return static_cast<double>(limit.rlim_cur);
  }

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
                          .Help("Time a successful call spent in each stage (queue, decode, "
                                "preprocess, embed, head); stages overlap.")
                          .Register(registry)),
      batch_frames_(prometheus::BuildHistogram()
                        .Name("vidclf_batch_frames")
                        .Help("Frames in each batch the backbone ran, from any number of calls.")
                        .Register(registry)
                        .Add({}, BatchBuckets())),
      frames_decoded_(prometheus::BuildCounter()
                          .Name("vidclf_frames_decoded_total")
                          .Help("Frames the decoders produced.")
                          .Register(registry)
                          .Add({})),
      decoded_clips_(prometheus::BuildCounter()
                         .Name("vidclf_decoded_clips_total")
                         .Help("Calls whose frames were decoded, by device: cpu, or cuda:N "
                               "(NVDEC).")
                         .Register(registry)),
      decode_fallbacks_(prometheus::BuildCounter()
                            .Name("vidclf_decode_fallbacks_total")
                            .Help("Calls decoded on the CPU where --decode-device asked for a "
                                  "GPU, by reason: no_gpu (none could be opened), codec "
                                  "(NVDEC has no decoder for it), sessions (all in use), format "
                                  "(the stream's profile, chroma or bit depth), cpu_faster (a "
                                  "lone call the CPU decodes faster, --decode-device auto).")
                            .Register(registry)),
      frames_embedded_(prometheus::BuildCounter()
                           .Name("vidclf_frames_embedded_total")
                           .Help("Frames the backbone embedded.")
                           .Register(registry)
                           .Add({})),
      refused_(prometheus::BuildCounter()
                   .Name("vidclf_rejected_total")
                   .Help("Calls and streams refused without being queued, by reason: requests "
                         "or bytes (a bound), deadline (the queue would outlast it), draining, "
                         "streams (the live stream bound).")
                   .Register(registry)),
      stream_frames_(prometheus::BuildCounter()
                         .Name("vidclf_stream_frames_total")
                         .Help("Frames of live streams handed to the backbone.")
                         .Register(registry)
                         .Add({})),
      stream_head_step_streams_(
          prometheus::BuildHistogram()
              .Name("vidclf_stream_head_step_streams")
              .Help("Live streams whose heads stepped together, in one pass over the weights.")
              .Register(registry)
              .Add({}, BatchBuckets())),
      stream_update_latency_(
          prometheus::BuildHistogram()
              .Name("vidclf_stream_update_latency_seconds")
              .Help("From the arrival of the newest frame a stream prediction covers to the "
                    "prediction being sent.")
              .Register(registry)
              .Add({}, LatencyBuckets())),
      stream_frame_stages_(prometheus::BuildHistogram()
                               .Name("vidclf_stream_frame_stage_seconds")
                               .Help("Where a live stream's frame spent its time before its "
                                     "head's step, by stage: decode (from its arrival until the "
                                     "decoder gave it out), convert (to the model's input), wait "
                                     "(for room among the stream's frames in flight), embed (to "
                                     "its embedding), head (to its step).")
                               .Register(registry)),
      stream_frame_decode_(stream_frame_stages_.Add({{"stage", "decode"}}, LatencyBuckets())),
      stream_frame_convert_(stream_frame_stages_.Add({{"stage", "convert"}}, LatencyBuckets())),
      stream_frame_wait_(stream_frame_stages_.Add({{"stage", "wait"}}, LatencyBuckets())),
      stream_frame_embed_(stream_frame_stages_.Add({{"stage", "embed"}}, LatencyBuckets())),
      stream_frame_head_(stream_frame_stages_.Add({{"stage", "head"}}, LatencyBuckets())),
      stream_dropped_predictions_(prometheus::BuildCounter()
                                      .Name("vidclf_stream_dropped_predictions_total")
                                      .Help("Stream predictions dropped because the client had "
                                            "not read the previous one yet.")
                                      .Register(registry)
                                      .Add({})),
      source_reconnects_(prometheus::BuildCounter()
                             .Name("vidclf_source_reconnects_total")
                             .Help("Attempts to follow a watched source again after it dropped.")
                             .Register(registry)
                             .Add({})),
      stream_events_(prometheus::BuildCounter()
                         .Name("vidclf_stream_events_total")
                         .Help("Segment events of live streams, by model, label and kind "
                               "(segment_start, segment_end).")
                         .Register(registry)),
      thread_binding_failures_(
          prometheus::BuildCounter()
              .Name("vidclf_backbone_thread_binding_failures_total")
              .Help("Times the backbone's intra-op threads could not all be bound one per CPU.")
              .Register(registry)
              .Add({})) {
  // Every reason reads 0 from the start, so that rates and alerts over them have a series before
  // the first refusal rather than none.
  for (const engine::Refusal refusal :
       {engine::Refusal::kRequests, engine::Refusal::kBytes, engine::Refusal::kDeadline,
        engine::Refusal::kDraining, engine::Refusal::kStreams}) {
    refused_.Add({{"reason", std::string(engine::RefusalName(refusal))}});
  }
}

void ServerMetrics::RecordRequest(absl::string_view method, absl::string_view model,
                                  absl::string_view code, double seconds) {
  const prometheus::Labels labels{
      {"method", std::string(method)}, {"model", std::string(model)}, {"code", std::string(code)}};
  requests_.Add(labels).Increment();
  request_duration_
      .Add({{"method", std::string(method)}, {"model", std::string(model)}}, LatencyBuckets())
      .Observe(seconds);
}

void ServerMetrics::RecordInference(absl::string_view model, double seconds,
                                    const engine::ClassifyResult* result) {
  absl::MutexLock lock(&inference_totals_mutex_);
  auto found = inference_totals_.find(model);
  if (found == inference_totals_.end()) {
    found = inference_totals_.emplace(std::string(model), InferenceTotals{}).first;
  }
  InferenceTotals& totals = found->second;
  if (result == nullptr) {
    ++totals.failures;
    totals.failure_seconds += seconds;
    return;
  }
  ++totals.successes;
  totals.success_seconds += seconds;
  totals.queue_seconds += result->queue_seconds;
  totals.input_seconds += result->decode_seconds + result->preprocess_seconds;
  totals.compute_seconds += result->embed_seconds + result->head_seconds;
  totals.last_success = absl::Now();
}

InferenceTotals ServerMetrics::InferenceTotalsOf(absl::string_view model) const {
  absl::MutexLock lock(&inference_totals_mutex_);
  const auto found = inference_totals_.find(model);
  return found == inference_totals_.end() ? InferenceTotals{} : found->second;
}

void ServerMetrics::StageDone(absl::string_view model, engine::Stage stage, double seconds) {
  stage_duration_
      .Add({{"model", std::string(model)}, {"stage", std::string(engine::StageName(stage))}},
           LatencyBuckets())
      .Observe(seconds);
}

void ServerMetrics::BatchDone(int frames) { batch_frames_.Observe(frames); }

void ServerMetrics::FramesDecoded(int64_t frames) {
  frames_decoded_.Increment(static_cast<double>(frames));
}

void ServerMetrics::FramesEmbedded(int64_t frames) {
  frames_embedded_.Increment(static_cast<double>(frames));
}

void ServerMetrics::Refused(engine::Refusal refusal) {
  refused_.Add({{"reason", std::string(engine::RefusalName(refusal))}}).Increment();
}

void ServerMetrics::StreamFrames(int64_t frames) {
  stream_frames_.Increment(static_cast<double>(frames));
}

void ServerMetrics::HeadStepped(int streams) { stream_head_step_streams_.Observe(streams); }

void ServerMetrics::StreamFrameTimed(const engine::StreamFrameTimes& times) {
  stream_frame_decode_.Observe(times.decode);
  stream_frame_convert_.Observe(times.convert);
  stream_frame_wait_.Observe(times.wait);
  stream_frame_embed_.Observe(times.embed);
  stream_frame_head_.Observe(times.head);
}

void ServerMetrics::SourceReconnect() { source_reconnects_.Increment(); }

void ServerMetrics::StreamSegmentEvent(absl::string_view model, absl::string_view label,
                                       bool start) {
  // Labels and models come from the bundles served: bounded.
  stream_events_
      .Add({{"model", std::string(model)},
            {"label", std::string(label)},
            {"kind", start ? "segment_start" : "segment_end"}})
      .Increment();
}

void ServerMetrics::ClipDecoded(absl::string_view device, absl::string_view gpu_fallback) {
  decoded_clips_.Add({{"device", std::string(device)}}).Increment();
  if (gpu_fallback.empty()) return;
  decode_fallbacks_.Add({{"reason", std::string(gpu_fallback)}}).Increment();
  absl::MutexLock lock(&fallbacks_logged_mutex_);
  if (fallbacks_logged_.emplace(gpu_fallback).second) {
    // Every call of a server without a GPU falls back; its start said so already.
    spdlog::log(
        gpu_fallback == media::kNoGpuFallback ? spdlog::level::info : spdlog::level::warn,
        "a call was decoded on the CPU where --decode-device asked for a GPU: {} (said once "
        "per reason; counted in vidclf_decode_fallbacks_total{{reason=\"{}\"}})",
        std::string(media::DescribeGpuFallback(gpu_fallback)), std::string(gpu_fallback));
  }
}

void ServerMetrics::ThreadBindingFailed(const absl::Status& why) {
  thread_binding_failures_.Increment();
  std::call_once(thread_binding_warned_, [&] {
    spdlog::warn(
        "backbone intra-op threads could not all be bound one per CPU: {} (counted in "
        "vidclf_backbone_thread_binding_failures_total)",
        std::string(why.message()));
  });
}

void ServerMetrics::RecordStreamUpdate(double latency_seconds) {
  stream_update_latency_.Observe(latency_seconds);
}

void ServerMetrics::RecordDroppedPredictions(int64_t predictions) {
  stream_dropped_predictions_.Increment(static_cast<double>(predictions));
}

std::shared_ptr<prometheus::Collectable> MakeEngineCollector(const engine::ClassifyEngine* engine) {
  return std::make_shared<EngineCollector>(engine);
}

std::shared_ptr<prometheus::Collectable> MakeSourcesCollector(
    const sources::SourceRegistry* registry, int per_source_limit) {
  return std::make_shared<SourcesCollector>(registry, per_source_limit);
}

std::shared_ptr<prometheus::Collectable> MakeMqttCollector(
    const sources::MqttPublisher* publisher) {
  return std::make_shared<MqttCollector>(publisher);
}

std::shared_ptr<prometheus::Collectable> MakeProcessCollector() {
  return std::make_shared<ProcessCollector>();
}

std::shared_ptr<prometheus::Collectable> MakeInternalErrorsCollector() {
  class InternalErrorsCollector : public prometheus::Collectable {
   public:
    std::vector<prometheus::MetricFamily> Collect() const override {
      prometheus::MetricFamily family =
          Family("vidclf_internal_errors_total",
                 "Exceptions that escaped a request's handling, answered as internal errors, by "
                 "where they were caught.",
                 prometheus::MetricType::Counter);
      for (const auto& [where, count] : InternalErrorCounts()) {
        AddSample(family, static_cast<double>(count), {{"where", where}});
      }
      return {family};
    }
  };
  return std::make_shared<InternalErrorsCollector>();
}

}  // namespace vidclf
