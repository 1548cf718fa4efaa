// vidclf-server: loads a model repository and serves vidclf.v1.VideoClassifier over gRPC, with the
// standard health service, server reflection and Prometheus metrics.
//
// Drain on SIGINT/SIGTERM: health answers NOT_SERVING (so load balancers stop sending) and new
// calls get UNAVAILABLE (so clients retry on another replica); calls in flight have
// --drain-timeout-s to finish, those still running then are cancelled, and the process exits 0.
// SIGHUP loads the model repository again and serves it from then on; calls in flight finish on
// the models they started with.
#include <fcntl.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <prometheus/registry.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "media/libav_settings.h"
#include "media/uri_allowlist.h"
#include "model/video_model.h"
#include "server/engine/classify_engine.h"
#include "server/engine/model_repository.h"
#include "server/idle_memory_releaser.h"
#include "server/metrics.h"
#include "server/metrics_http_server.h"
#include "server/service/classify_service.h"

extern "C" {
#include <libavutil/log.h>
}

// The command line: every field is a --flag with dashes for underscores.
struct ServerFlags {
  std::string model_repository;
  std::string default_model;
  std::string host = "0.0.0.0";
  int grpc_port = 50051;
  int metrics_port = 9464;
  std::string metrics_host;
  std::string device = "auto";
  std::string precision = "fp32";
  std::string memory_format = "channels-last";
  int cores = 0;
  int decode_slots = 0;
  int max_batch_frames = 16;
  int max_queue_delay_us = 2000;
  int max_inflight_requests = 64;
  int max_inflight_mib = 1024;
  int max_upload_mib = 64;
  int decode_timeout_ms = 30000;
  int drain_timeout_s = 30;
  int max_streams = 16;
  int stream_idle_timeout_s = 30;
  double source_stall_timeout_s = 10;
  int source_reconnects = 5;
  std::vector<std::string> allow_uri;
  std::string media_log_level = "error";
};

void AddServerFlags(CLI::App& app, ServerFlags* flags) {
  app.add_option("--model-repository", flags->model_repository,
                 "Directory of model bundles: DIR/<name>/<version>/.")
      ->required();
  app.add_option("--default-model", flags->default_model,
                 "Model for requests that name none (default: the first by name).");
  app.add_option("--host", flags->host, "Address to listen on (gRPC, and /metrics unless told).")
      ->capture_default_str();
  app.add_option("--grpc-port", flags->grpc_port,
                 "gRPC port; 0 picks a free one (printed at start).")
      ->capture_default_str();
  app.add_option("--metrics-port", flags->metrics_port,
                 "Prometheus /metrics port; 0 picks a free one.")
      ->capture_default_str();
  app.add_option("--metrics-host", flags->metrics_host,
                 "Address /metrics listens on, when not --host's: localhost, say, or the pod's "
                 "IP where gRPC listens on all addresses.");
  app.add_option("--device", flags->device,
                 "auto (the first CUDA GPU if any, else the CPU), cpu or cuda:N.")
      ->capture_default_str();
  app.add_option("--precision", flags->precision,
                 "Backbone precision: fp32, or on CUDA fp16 or bf16.")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}));
  app.add_option("--memory-format", flags->memory_format,
                 "Backbone layout: channels-last (faster on CPU too; "
                 "docs/backbone-benchmark.md) or nchw.")
      ->capture_default_str()
      ->check(CLI::IsMember({"channels-last", "nchw"}));
  app.add_option("--cores", flags->cores,
                 "Cores that decoding and the backbone share (0: the machine's). A call decoding "
                 "alone uses them all; the backbone takes those that decoding leaves free.")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--decode-slots", flags->decode_slots, "Calls decoded at once (0: one per core).")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-batch-frames", flags->max_batch_frames,
                 "Most frames, from any calls, in one backbone batch.")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-queue-delay-us", flags->max_queue_delay_us,
                 "Longest a frame waits for others to join its batch while calls are decoding.")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
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
                 "Live streams (StreamClassify, WatchSource) followed at once; past it, a new one "
                 "gets "
                 "RESOURCE_EXHAUSTED.")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--stream-idle-timeout-s", flags->stream_idle_timeout_s,
                 "A live stream that sends nothing for this long is ended (DEADLINE_EXCEEDED) "
                 "and its state freed.")
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
  app.add_option("--media-log-level", flags->media_log_level, "FFmpeg's log level on stderr.")
      ->capture_default_str()
      ->check(CLI::IsMember({"quiet", "error", "warning", "info", "debug"}));
}

namespace {

// Signals reach the main thread through a pipe: the handler only writes the signal's number.
// (Blocking them for sigwait is not enough: libraries start threads before main, OpenBLAS's
// among them, and a signal the main thread no longer waits for would kill the process there.)
int signal_pipe[2] = {-1, -1};

void OnSignal(int signal) {
  const char number = static_cast<char>(signal);
  [[maybe_unused]] const ssize_t written = write(signal_pipe[1], &number, 1);
}

void HandleSignals() {
  if (pipe2(signal_pipe, O_CLOEXEC) != 0) return;
  struct sigaction action = {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (const int signal : {SIGINT, SIGTERM, SIGHUP}) sigaction(signal, &action, nullptr);
}

// The next signal that arrives; SIGTERM if signals cannot be read.
int NextSignal() {
  char number = 0;
  while (true) {
    const ssize_t n = read(signal_pipe[0], &number, 1);
    if (n == 1) return number;
    if (n < 0 && errno == EINTR) continue;
    return SIGTERM;
  }
}

// FFmpeg's level for --media-log-level, whose values CLI11 has checked.
int MediaLogLevel(const std::string& name) {
  static const auto& kLevels = *new std::map<std::string, int>{{"quiet", AV_LOG_QUIET},
                                                               {"error", AV_LOG_ERROR},
                                                               {"warning", AV_LOG_WARNING},
                                                               {"info", AV_LOG_INFO},
                                                               {"debug", AV_LOG_DEBUG}};
  return kLevels.at(name);
}

// Resolves --device, so that the log names the device actually used.
absl::StatusOr<vidclf::model::InferenceOptions> InferenceOptionsFromFlags(
    const ServerFlags& flags) {
  absl::StatusOr<torch::Device> device = vidclf::model::ResolveDevice(flags.device);
  if (!device.ok()) return device.status();
  vidclf::model::InferenceOptions options;
  options.device = device->str();
  options.precision = flags.precision;
  options.channels_last = flags.memory_format == "channels-last";
  return options;
}

// Prints the models a repository serves.
void PrintModels(const vidclf::engine::ModelRepository& repository) {
  for (const auto& [name, entry] : repository.entries()) {
    std::cout << "loaded model " << name << " version " << entry.model->config().version << " ("
              << entry.model->config().labels.size() << " labels)" << std::endl;
  }
}

int Run(const ServerFlags& flags) {
  using vidclf::engine::ClassifyEngine;
  using vidclf::engine::ModelRepository;
  const std::string& repository_dir = flags.model_repository;
  int cores = flags.cores;
  if (cores <= 0) cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  vidclf::IdleMemoryReleaser::LimitArenas(cores);
  std::cout << vidclf::model::ConfigureTorchThreads(cores) << std::endl;

  absl::StatusOr<vidclf::model::InferenceOptions> inference = InferenceOptionsFromFlags(flags);
  if (!inference.ok()) {
    std::cerr << "vidclf-server: " << inference.status().message() << "\n";
    return 2;
  }
  std::cout << "models run on " << inference->device << " in " << inference->precision << ", "
            << (inference->channels_last ? "channels-last" : "NCHW") << std::endl;
  absl::StatusOr<std::unique_ptr<ModelRepository>> repository =
      ModelRepository::Load(repository_dir, flags.default_model, *inference);
  if (!repository.ok()) {
    std::cerr << "vidclf-server: " << repository.status().message() << "\n";
    return 1;
  }
  PrintModels(**repository);

  absl::StatusOr<vidclf::media::UriAllowlist> allowlist =
      vidclf::media::UriAllowlist::Parse(flags.allow_uri);
  if (!allowlist.ok()) {
    std::cerr << "vidclf-server: --allow-uri: " << allowlist.status().message() << "\n";
    return 2;
  }
  vidclf::media::LibavSettings libav;
  libav.log_level = MediaLogLevel(flags.media_log_level);
  vidclf::media::ConfigureLibav(libav);  // before any thread decodes

  vidclf::engine::EngineOptions engine_options;
  engine_options.uri_allowlist = *std::move(allowlist);
  engine_options.cores = cores;
  engine_options.decode_slots = flags.decode_slots;
  engine_options.batching.max_batch_frames = flags.max_batch_frames;
  engine_options.batching.max_queue_delay = absl::Microseconds(flags.max_queue_delay_us);
  engine_options.admission.max_inflight_calls = flags.max_inflight_requests;
  engine_options.admission.max_inflight_bytes = static_cast<int64_t>(flags.max_inflight_mib) << 20;
  engine_options.decode.max_input_bytes = static_cast<int64_t>(flags.max_upload_mib) << 20;
  engine_options.decode.decode_timeout_ms = flags.decode_timeout_ms;
  engine_options.max_streams = flags.max_streams;
  engine_options.stream_idle_timeout = absl::Seconds(flags.stream_idle_timeout_s);
  engine_options.stream_resources.source_stall_timeout =
      absl::Seconds(flags.source_stall_timeout_s);
  engine_options.stream_resources.max_source_reconnects = flags.source_reconnects;
  auto registry = std::make_shared<prometheus::Registry>();
  vidclf::ServerMetrics metrics(*registry);
  absl::StatusOr<std::unique_ptr<ClassifyEngine>> engine =
      ClassifyEngine::Create(engine_options, *std::move(repository), &metrics);
  if (!engine.ok()) {
    std::cerr << "vidclf-server: " << engine.status().message() << "\n";
    return 2;
  }

  const std::string& host = flags.host;
  const std::string& metrics_host = flags.metrics_host.empty() ? host : flags.metrics_host;
  absl::StatusOr<std::unique_ptr<vidclf::MetricsHttpServer>> metrics_server =
      vidclf::MetricsHttpServer::Start(
          metrics_host, flags.metrics_port,
          {registry, vidclf::MakeEngineCollector(engine->get()), vidclf::MakeProcessCollector()});
  if (!metrics_server.ok()) {
    std::cerr << "vidclf-server: " << metrics_server.status().message() << "\n";
    return 1;
  }

  // Busy until the last call in flight is answered and destroyed, and the last stream ends.
  auto releaser = std::make_unique<vidclf::IdleMemoryReleaser>(
      [engine = engine->get()] {
        const vidclf::engine::EngineLoad load = engine->load();
        return load.inflight_calls > 0 || !load.active_streams.empty();
      },
      absl::Seconds(1));
  vidclf::service::ClassifyService service(engine->get(), &metrics);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int grpc_port = 0;
  builder.AddListeningPort(absl::StrCat(host, ":", flags.grpc_port),
                           grpc::InsecureServerCredentials(), &grpc_port);
  // The upload is one message: allow the configured maximum plus room for the other fields.
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(engine_options.decode.max_input_bytes + (1 << 20)));
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || grpc_port == 0) {
    std::cerr << "vidclf-server: cannot listen on " << host << ":" << flags.grpc_port << "\n";
    return 1;
  }
  // Health answers for the whole server ("") and for our service by name, as probes may ask either.
  server->GetHealthCheckService()->SetServingStatus(
      vidclf::v1::VideoClassifier::service_full_name(), true);
  server->GetHealthCheckService()->SetServingStatus(true);

  // Tests and scripts read these two lines to find the ports.
  std::cout << "gRPC listening on " << host << ":" << grpc_port << std::endl;
  std::cout << "metrics on http://" << metrics_host << ":" << (*metrics_server)->port()
            << "/metrics" << std::endl;
  std::cout << "classify a video from another terminal with:\n  vidclf classify VIDEO --server "
            << "localhost:" << grpc_port << std::endl;

  // Later SIGTERMs, during the drain, land in the pipe unread.
  while (NextSignal() == SIGHUP) {
    std::cout << "SIGHUP: reloading the model repository " << repository_dir << std::endl;
    absl::StatusOr<std::unique_ptr<ModelRepository>> reloaded =
        ModelRepository::Load(repository_dir, flags.default_model, *inference);
    if (!reloaded.ok()) {
      std::cerr << "vidclf-server: reload failed, still serving the models loaded before: "
                << reloaded.status().message() << std::endl;
      continue;
    }
    PrintModels(**reloaded);
    (*engine)->ReplaceRepository(*std::move(reloaded));
    std::cout << "model repository reloaded" << std::endl;
  }

  const absl::Duration drain_timeout = absl::Seconds(flags.drain_timeout_s);
  std::cout << "draining: refusing new calls and ending live streams, up to "
            << absl::FormatDuration(drain_timeout) << " for " << (*engine)->load().inflight_calls
            << " calls in flight" << std::endl;
  server->GetHealthCheckService()->SetServingStatus(false);
  (*engine)->StartDraining();
  if (!(*engine)->WaitUntilIdle(absl::Now() + drain_timeout)) {
    std::cout << "drain timeout: cancelling " << (*engine)->load().inflight_calls
              << " calls still in flight" << std::endl;
    (*engine)->CancelAll(absl::UnavailableError(
        "the server shut down before the call finished; retry on another replica"));
    (*engine)->WaitUntilIdle(absl::InfiniteFuture());
  }
  // Every call has its answer; give the RPCs a moment to send them, then stop.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  // What reads the engine goes before it.
  releaser.reset();
  metrics_server->reset();
  engine->reset();
  std::cout << "stopped" << std::endl;
  return 0;
}

}  // namespace

// LibTorch's OpenMP threads spin while they wait for work, which steals the cores that decoding
// shares with them: with OMP_WAIT_POLICY=PASSIVE, one call at a time came back in 686 ms instead
// of 825 ms (median of 12 calls over three real files), and 8 at a time gave 2.25 clips/s
// instead of 2.08. libgomp reads the policy when it is loaded, before main, so the server starts
// itself again with it set unless the caller chose one.
void PreferPassiveOpenMpThreads(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/1);
  execv("/proc/self/exe", argv);  // returns only on failure: then go on as we are
}

int main(int argc, char** argv) {
  PreferPassiveOpenMpThreads(argv);
  HandleSignals();
  CLI::App app("vidclf-server: serves the models of a repository over gRPC.");
  ServerFlags flags;
  AddServerFlags(app, &flags);
  CLI11_PARSE(app, argc, argv);
  return Run(flags);
}
