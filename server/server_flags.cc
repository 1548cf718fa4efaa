#include "server/server_flags.h"

#include <algorithm>
#include <map>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "media/nvdec_device.h"
#include "server/http/cors.h"

extern "C" {
#include <libavutil/log.h>
}

namespace vidclf {
namespace {

// FFmpeg's level for --media-log-level, whose values CLI11 has checked.
int MediaLogLevel(const std::string& name) {
  static const auto& kLevels = *new std::map<std::string, int>{{"quiet", AV_LOG_QUIET},
                                                               {"error", AV_LOG_ERROR},
                                                               {"warning", AV_LOG_WARNING},
                                                               {"info", AV_LOG_INFO},
                                                               {"debug", AV_LOG_DEBUG}};
  return kLevels.at(name);
}

absl::StatusOr<model::InferenceOptions> InferenceOptionsFromFlags(const ServerFlags& flags) {
  model::InferenceOptions options;
  if (flags.device != "auto") {
    absl::StatusOr<torch::Device> device = model::ResolveDevice(flags.device);
    if (!device.ok()) return device.status();
    options.device = *device;
  }
  absl::StatusOr<model::Precision> precision = model::ParsePrecision(flags.precision);
  if (!precision.ok()) return precision.status();
  absl::StatusOr<model::BackboneKernels> kernels =
      model::ParseBackboneKernels(flags.backbone_kernels);
  if (!kernels.ok()) return kernels.status();
  absl::StatusOr<model::StepWeights> step_weights =
      model::ParseStepWeights(flags.stream_step_weights);
  if (!step_weights.ok()) return step_weights.status();
  options.precision = *precision;
  options.channels_last = flags.memory_format == "channels-last";
  options.backbone_kernels = *kernels;
  options.cuda_graph_step = flags.stream_step == "cuda-graph";
  options.step_weights = *step_weights;
  return options;
}

absl::StatusOr<DecodeDeviceOptions> DecodeDeviceFromFlags(const ServerFlags& flags) {
  DecodeDeviceOptions options;
  options.max_sessions = flags.max_nvdec_sessions;
  options.idle_decoders = flags.idle_nvdec_decoders;
  options.convert_on_gpu = flags.nvdec_conversion == "gpu";
  absl::string_view device = flags.decode_device;
  if (device == "cpu") return options;
  if (device == "auto") {
    options.kind = DecodeDeviceOptions::Kind::kAuto;
    return options;
  }
  absl::StatusOr<int> cuda_index = media::CudaDeviceIndex(device);
  if (!cuda_index.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--decode-device: \"", flags.decode_device,
                                                   "\" is none of auto, cpu, cuda:N"));
  }
  options.kind = DecodeDeviceOptions::Kind::kCuda;
  options.cuda_index = *cuda_index;
  return options;
}

engine::EngineOptions EngineOptionsFromFlags(const ServerFlags& flags) {
  engine::EngineOptions options;
  options.cores = flags.cores > 0
                      ? flags.cores
                      : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  options.decode_slots = flags.decode_slots;
  options.arrival_slots = flags.arrival_slots;
  options.head_threads = flags.head_threads;
  options.head_intra_op_threads = flags.head_intra_op_threads;
  options.batching.max_batch_frames = flags.max_batch_frames;
  options.batching.max_queue_delay = absl::Microseconds(flags.max_queue_delay_us);
  options.batching.embed_while_decoding = flags.embed_while_decoding;
  options.batching.batches_with_feeds = flags.backbone_batches_with_feeds;
  options.bind_backbone_threads = flags.bind_backbone_threads;
  options.admission.max_inflight_calls = flags.max_inflight_requests;
  options.admission.max_inflight_bytes = static_cast<int64_t>(flags.max_inflight_mib) << 20;
  options.decode.max_input_bytes = static_cast<int64_t>(flags.max_upload_mib) << 20;
  options.decode.decode_timeout_ms = flags.decode_timeout_ms;
  options.max_streams = flags.max_streams;
  options.stream_idle_timeout = absl::Seconds(flags.stream_idle_timeout_s);
  options.stream_resources.source_stall_timeout = absl::Seconds(flags.source_stall_timeout_s);
  options.stream_resources.max_source_reconnects = flags.source_reconnects;
  return options;
}

}  // namespace

void AddServerFlags(CLI::App& app, ServerFlags* flags) {
  app.add_option("--model-repository", flags->model_repository,
                 "Directory of model bundles: DIR/<name>/<version>/.")
      ->required();
  app.add_option("--default-model", flags->default_model,
                 "Model for requests that name none (default: the first by name).");
  app.add_option("--host", flags->host,
                 "Address to listen on (gRPC, and /metrics unless told). Loopback by default, "
                 "since without --tls-cert and --token-file anyone who reaches the port may call "
                 "it; 0.0.0.0 for every address (the container image passes it).")
      ->capture_default_str();
  app.add_option("--grpc-port", flags->grpc_port,
                 "gRPC port; 0 picks a free one (printed at start).")
      ->capture_default_str();
  app.add_option("--http-port", flags->http_port,
                 "Port of the Open Inference Protocol's HTTP/REST endpoints (/v2/...) and of "
                 "POST /v2/models/NAME/classify for curl, on --host, with --tls-cert and "
                 "--token-file as gRPC's; 0 picks a free one; -1 (the default): none.")
      ->capture_default_str()
      ->check(CLI::Range(-1, 65535));
  app.add_flag("--http-page,!--no-http-page", flags->http_page,
               "Serve the page for people at / on --http-port: drop a video, see its labels, "
               "scores, frames and timings, and the models (it calls the REST endpoints only). "
               "--no-http-page for locked-down deployments.")
      ->capture_default_str();
  app.add_option("--http-allow-origin", flags->http_allow_origin,
                 "Origins whose pages may call the HTTP door with fetch (CORS), as browsers send "
                 "them: https://app.example.com,http://localhost:8000, or * for any. Tokens "
                 "still apply. Default: none.")
      ->delimiter(',')
      ->check([](const std::string& origin) {
        const absl::Status status = http::CorsPolicy::CheckOrigin(origin);
        return status.ok() ? std::string() : std::string(status.message());
      });
  app.add_option("--http-body-timeout-s", flags->http_body_timeout_s,
                 "A connection whose request body is still arriving this many seconds after its "
                 "headers is closed, so that clients who trickle bodies cannot hold connections.")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400));
  app.add_option("--metrics-port", flags->metrics_port,
                 "Prometheus /metrics port; 0 picks a free one.")
      ->capture_default_str();
  app.add_option("--metrics-host", flags->metrics_host,
                 "Address /metrics listens on, when not --host's: localhost, say, or the pod's "
                 "IP where gRPC listens on all addresses.");
  app.add_option("--metrics-tls-cert", flags->metrics_tls_cert,
                 "PEM certificate chain: /metrics is served over HTTPS (read at start; may be "
                 "--tls-cert's file).");
  app.add_option("--metrics-tls-key", flags->metrics_tls_key,
                 "PEM private key of --metrics-tls-cert.");
  app.add_option("--metrics-token-file", flags->metrics_token_file,
                 "File of bearer tokens, one per line, as --token-file's: a scrape must send "
                 "\"Authorization: Bearer TOKEN\" (Prometheus: authorization.credentials_file) or "
                 "gets 401. Re-read on SIGHUP.");
  app.add_option("--device", flags->device,
                 "auto (the first CUDA GPU if any, else the CPU), cpu or cuda:N.")
      ->capture_default_str();
  app.add_option("--decode-device", flags->decode_device,
                 "Where video is decoded: cpu; auto (on the GPU the models run on, by its NVDEC "
                 "video engines, where the codec and profile allow; else on the CPU, counted in "
                 "vidclf_decode_fallbacks_total); or cuda:N (the server does not start without "
                 "it). Under concurrent calls NVDEC answers more of them for a fifth of the CPU "
                 "time; one 720p H.264 call alone decodes faster on 16 cores "
                 "(docs/gpu-serving-benchmark.md).")
      ->capture_default_str();
  app.add_option("--max-nvdec-sessions", flags->max_nvdec_sessions,
                 "NVDEC decoders open at once; past them, video decodes on the CPU.")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option(
         "--idle-nvdec-decoders", flags->idle_nvdec_decoders,
         "NVDEC decoders kept set up between calls, each holding a session: a call that "
         "finds one of its codec and picture size skips the decoder's setting up and "
         "taking down (0.2-0.3 s). At most half of --max-nvdec-sessions; 0: each call sets its "
         "own up.")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  app.add_option("--nvdec-conversion", flags->nvdec_conversion,
                 "Where NVDEC's frames become the model's input: gpu (by tensor operations on the "
                 "GPU, with no copy to the host, when the models run on that GPU) or host (copied "
                 "to the host and converted by libswscale, as frames decoded on the CPU).")
      ->capture_default_str()
      ->check(CLI::IsMember({"gpu", "host"}));
  app.add_option("--precision", flags->precision,
                 "Backbone precision: fp32; fp16 on CUDA; bf16 on CUDA or on a CPU with bf16 "
                 "instructions (AVX-512 BF16, AMX); int8 on a CPU with VNNI (AVX-512 VNNI, "
                 "AVX-VNNI, AMX), for bundles with an int8 calibration (vidclf-train calibrate); "
                 "auto: for each model the fastest of int8 and bf16 that the device runs and "
                 "whose evaluation the bundle records as meeting the bar (99% the same top "
                 "class, at most 0.5 points of accuracy lost), else fp32.")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "fp16", "bf16", "int8", "auto"}));
  app.add_option("--memory-format", flags->memory_format,
                 "Backbone layout: channels-last (faster on CPU too; "
                 "docs/backbone-benchmark.md) or nchw.")
      ->capture_default_str()
      ->check(CLI::IsMember({"channels-last", "nchw"}));
  app.add_option("--backbone-kernels", flags->backbone_kernels,
                 "winograd: fused, on oneDNN's own primitives, the 3x3 convolutions of large "
                 "frames on its Winograd kernels where the CPU runs them (AVX-512 in fp32), else "
                 "as fused; fused: batch norm folded into the convolutions, which run as oneDNN's "
                 "pre-packed kernels on the CPU in fp32 (docs/backbone-benchmark.md); eager: the "
                 "module as trained.")
      ->capture_default_str()
      ->check(CLI::IsMember({"fused", "winograd", "eager"}));
  app.add_option("--stream-step", flags->stream_step,
                 "cuda-graph: on CUDA, a live stream's recurrent transformer head steps by "
                 "replaying a CUDA graph captured at load, about 5x faster "
                 "(docs/gpu-benchmark.md); eager: one launch per operation. No effect on the CPU.")
      ->capture_default_str()
      ->check(CLI::IsMember({"cuda-graph", "eager"}));
  app.add_option("--stream-step-weights", flags->stream_step_weights,
                 "int8: on the CPU, a live stream's new frame goes through int8 copies of a "
                 "causal-linear transformer head's weights, one scale per row: a lone stream's "
                 "step about twice as fast; on the synthetic benchmark the same top class on "
                 "every clip, probabilities moved by at most 0.02 (docs/streaming-benchmark.md). "
                 "float32: exact. Other heads keep float32.")
      ->capture_default_str()
      ->check(CLI::IsMember({"float32", "int8"}));
  app.add_option("--cores", flags->cores,
                 "Cores that decoding and the backbone share (0: the machine's). A call decoding "
                 "alone uses them all; the backbone takes those that decoding leaves free.")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--arrival-slots", flags->arrival_slots,
                 "Calls decoded at once whose input arrives while they decode (uploads in "
                 "chunks, URIs), apart from --decode-slots, so that a client that stalls holds "
                 "up no call whose bytes are in hand (0: four times --decode-slots).")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--decode-slots", flags->decode_slots, "Calls decoded at once (0: one per core).")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--head-threads", flags->head_threads,
                 "Threads that run heads; live streams' steps are shared among them.")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("--head-intra-op-threads", flags->head_intra_op_threads,
                 "LibTorch intra-op threads that run heads and live streams' steps (0: as many "
                 "as --cores).")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-batch-frames", flags->max_batch_frames,
                 "Most frames, from any calls, in one backbone batch (0: 16 where the models run "
                 "on the CPU, 64 on a GPU).")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  app.add_option("--max-queue-delay-us", flags->max_queue_delay_us,
                 "Longest a frame waits for others to join its batch while calls are decoding.")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--embed-while-decoding", flags->embed_while_decoding,
               "Embed a call's frames as they are decoded instead of once its decoder is done "
               "(which answered one call at a time sooner on two cores).");
  app.add_option("--backbone-batches-with-feeds", flags->backbone_batches_with_feeds,
                 "Backbone batches embedded at once while live feeds are open, each on its own "
                 "thread with an equal share of the cores (0: 2 where the models run on a CPU "
                 "of 2 cores or more, else 1); one at a time otherwise, which answers a lone "
                 "call soonest. 2 kept up with more feeds on two cores "
                 "(docs/streaming-benchmark.md).")
      ->capture_default_str()
      ->check(CLI::Range(0, 64));
  app.add_flag("--bind-backbone-threads,!--no-bind-backbone-threads", flags->bind_backbone_threads,
               "Bind the backbone's intra-op threads one per CPU where the models run on the CPU "
               "and this process may run on exactly --cores CPUs (a dedicated cpuset or the "
               "whole machine); elsewhere they are left to the kernel.")
      ->capture_default_str();
  app.add_option("--max-inflight-requests", flags->max_inflight_requests,
                 "Calls in flight at once; past it, calls get RESOURCE_EXHAUSTED at once.")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-inflight-mib", flags->max_inflight_mib,
                 "MiB that calls in flight may hold (payloads, uploads, decoded frames); past "
                 "it, calls get RESOURCE_EXHAUSTED at once.")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-upload-mib", flags->max_upload_mib, "Largest accepted video, in MiB.")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--decode-timeout-ms", flags->decode_timeout_ms,
                 "Wall-clock budget for decoding one video (DEADLINE_EXCEEDED past it); 0: none.")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--drain-timeout-s", flags->drain_timeout_s,
                 "On SIGTERM or SIGINT, seconds given to calls in flight before they are "
                 "cancelled.")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-streams", flags->max_streams,
                 "Live streams (StreamClassify, WatchSource, ModelStreamInfer sequences) and "
                 "ClassifySegments calls followed at once; past it, a new one gets "
                 "RESOURCE_EXHAUSTED.")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--stream-idle-timeout-s", flags->stream_idle_timeout_s,
                 "A live stream or an upload that sends no new bytes or frames for this long "
                 "(before its config or settings too; empty chunks do not count) is ended "
                 "(DEADLINE_EXCEEDED) and what it held freed.")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--source-stall-timeout-s", flags->source_stall_timeout_s,
                 "A source pulled by WatchSource that sends nothing for this long has dropped.")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--source-reconnects", flags->source_reconnects,
                 "Failed attempts in a row to follow a dropped WatchSource source again before "
                 "its call ends with UNAVAILABLE; also the most a call may ask for.")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--allow-uri", flags->allow_uri,
                 "Comma-separated URI prefixes that requests may ask the server to pull video "
                 "from, e.g. https://media.example.com/clips/,file:///srv/videos/ (default: "
                 "none).")
      ->delimiter(',');
  app.add_option("--media-log-level", flags->media_log_level,
                 "FFmpeg's log level; its lines join the server's log as \"ffmpeg: ...\".")
      ->capture_default_str()
      ->check(CLI::IsMember({"quiet", "error", "warning", "info", "debug"}));
  app.add_option("--tls-cert", flags->tls_cert,
                 "PEM certificate chain: gRPC is served over TLS (re-read every minute, so a "
                 "renewed certificate needs no restart).");
  app.add_option("--tls-key", flags->tls_key, "PEM private key of --tls-cert.");
  app.add_option("--tls-client-ca", flags->tls_client_ca,
                 "PEM CA bundle: clients must present a certificate it signed (mutual TLS).");
  app.add_option("--token-file", flags->token_file,
                 "File of bearer tokens, one per line: calls must send \"authorization: Bearer "
                 "TOKEN\" or get UNAUTHENTICATED. Health and reflection stay open. Re-read on "
                 "SIGHUP.");
  app.add_option("--admin-token-file", flags->admin_token_file,
                 "File of bearer tokens that creating, changing and deleting sources (the "
                 "Sources API) needs, apart from --token-file's; re-read on SIGHUP. Without it, "
                 "a server that has --token-file refuses those calls, and one without any "
                 "tokens takes them from anyone.");
  app.add_option("--state-dir", flags->state_dir,
                 "Directory where the registered sources are kept (sources.json, 0600), so "
                 "that every camera is followed again after a restart; empty: not kept.");
  app.add_option("--max-sources", flags->max_sources,
                 "Sources registered at most (the Sources API); each one followed also counts "
                 "as a live stream against --max-streams.")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--source-metrics-limit", flags->source_metrics_limit,
                 "Sources (the first by id) with metrics of their own, labelled source=ID; the "
                 "others count only in vidclf_sources{state}, so that /metrics stays bounded.")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--mqtt-url", flags->mqtt_url,
                 "Publish the sources' predictions, segment events and states to this MQTT "
                 "broker: mqtt://[USER[:PASSWORD]@]HOST[:PORT] or mqtts://... (TLS), topics "
                 "PREFIX/ID/predictions, /events and /state (retained).");
  app.add_option("--mqtt-ca", flags->mqtt_ca,
                 "mqtts: the PEM CA bundle that signed the broker's certificate (default: the "
                 "system's).");
  app.add_option("--mqtt-topic-prefix", flags->mqtt_topic_prefix, "The topics' first level.")
      ->capture_default_str();
  app.add_option("--mqtt-client-id", flags->mqtt_client_id,
                 "The MQTT client id (default: one the library makes).");
  app.add_option("--mqtt-max-queued", flags->mqtt_max_queued,
                 "Events and state changes held while the broker is away; past it the oldest "
                 "are dropped (vidclf_mqtt_dropped_total).")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--keepalive-time-s", flags->keepalive_time_s,
                 "Ping a connection quiet for this long (0: never), so that a client gone "
                 "without closing it (a dead NAT entry, a camera switched off) is found.")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--keepalive-timeout-s", flags->keepalive_timeout_s,
                 "Close the connection, ending its calls, when a ping gets no answer this long.")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-streams-per-connection", flags->max_streams_per_connection,
                 "Calls one connection may have open at once (HTTP/2 concurrent streams).")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-connection-age-s", flags->max_connection_age_s,
                 "Ask clients to open a new connection after this long (0: never), so that "
                 "behind a balancer new calls and streams spread onto new replicas.")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-connection-age-grace-s", flags->max_connection_age_grace_s,
                 "Then how long calls and live streams already on the old connection may go on "
                 "(0: until they end).")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--log-format", flags->log_format, "One line per event, as text or json.")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}));
  app.add_option("--log-level", flags->log_level,
                 "Least severe events logged; debug adds a line per finished call.")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  app.add_option("--access-log", flags->access_log,
                 "Finished calls logged at info, a line each (method, model, status, seconds, "
                 "peer): off, errors (those that did not end OK) or all.")
      ->capture_default_str()
      ->check(CLI::IsMember({"off", "errors", "all"}));
}

service::AccessLog AccessLogOf(const ServerFlags& flags) {
  if (flags.access_log == "off") return service::AccessLog::kOff;
  return flags.access_log == "all" ? service::AccessLog::kAll : service::AccessLog::kErrors;
}

absl::StatusOr<ServerOptions> ServerOptionsFromFlags(const ServerFlags& flags) {
  ServerOptions options;
  options.model_repository = flags.model_repository;
  options.default_model = flags.default_model;
  absl::StatusOr<model::InferenceOptions> inference = InferenceOptionsFromFlags(flags);
  if (!inference.ok()) return inference.status();
  options.inference = *std::move(inference);
  absl::StatusOr<DecodeDeviceOptions> decode_device = DecodeDeviceFromFlags(flags);
  if (!decode_device.ok()) return decode_device.status();
  options.decode_device = *decode_device;
  options.engine = EngineOptionsFromFlags(flags);
  absl::StatusOr<media::UriAllowlist> allowlist = media::UriAllowlist::Parse(flags.allow_uri);
  if (!allowlist.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--allow-uri: ", allowlist.status().message()));
  }
  options.engine.uri_allowlist = *std::move(allowlist);
  options.libav.log_level = MediaLogLevel(flags.media_log_level);
  options.host = flags.host;
  options.grpc_port = flags.grpc_port;
  options.tls = {flags.tls_cert, flags.tls_key, flags.tls_client_ca};
  options.token_file = flags.token_file;
  options.admin_token_file = flags.admin_token_file;
  options.state_dir = flags.state_dir;
  options.max_sources = flags.max_sources;
  options.source_metrics_limit = flags.source_metrics_limit;
  options.mqtt = {flags.mqtt_url, flags.mqtt_ca, flags.mqtt_topic_prefix, flags.mqtt_client_id,
                  flags.mqtt_max_queued};
  options.connections.keepalive_time = absl::Seconds(flags.keepalive_time_s);
  options.connections.keepalive_timeout = absl::Seconds(flags.keepalive_timeout_s);
  options.connections.max_streams_per_connection = flags.max_streams_per_connection;
  options.connections.max_connection_age = absl::Seconds(flags.max_connection_age_s);
  options.connections.max_connection_age_grace = absl::Seconds(flags.max_connection_age_grace_s);
  options.http = {flags.http_port, flags.http_page, flags.http_allow_origin,
                  flags.http_body_timeout_s};
  options.metrics.host = flags.metrics_host.empty() ? flags.host : flags.metrics_host;
  options.metrics.port = flags.metrics_port;
  options.metrics.tls_cert = flags.metrics_tls_cert;
  options.metrics.tls_key = flags.metrics_tls_key;
  options.metrics_token_file = flags.metrics_token_file;
  options.drain_timeout = absl::Seconds(flags.drain_timeout_s);
  return options;
}

}  // namespace vidclf
