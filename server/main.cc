// vidclf-server: loads a model repository and serves vidclf.v1.VideoClassifier over gRPC, with the
// standard health service, server reflection and Prometheus metrics.
//
// Drain on SIGINT/SIGTERM: health answers NOT_SERVING (so load balancers stop sending) and new
// calls get UNAVAILABLE (so clients retry on another replica); calls in flight have
// --drain-timeout-s to finish, those still running then are cancelled, and the process exits 0.
// SIGHUP loads the model repository and the token file again and serves them from then on; calls
// in flight finish on the models they started with.
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <prometheus/registry.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "media/libav_settings.h"
#include "media/uri_allowlist.h"
#include "model/library_settings.h"
#include "model/tensor_heap.h"
#include "model/thread_affinity.h"
#include "model/video_model.h"
#include "server/engine/classify_engine.h"
#include "server/engine/model_repository.h"
#include "server/idle_memory_releaser.h"
#include "server/logging.h"
#include "server/metrics.h"
#include "server/metrics_http_server.h"
#include "server/security/bearer_tokens.h"
#include "server/security/call_gate.h"
#include "server/security/server_credentials.h"
#include "server/server_flags.h"
#include "server/service/classify_service.h"
#include "server/service/finished_call.h"
#include "server/signal_pipe.h"
#include "server/startup_warnings.h"

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

// Resolves --device, so that the log names the device actually used.
absl::StatusOr<model::InferenceOptions> InferenceOptionsFromFlags(const ServerFlags& flags) {
  absl::StatusOr<torch::Device> device = model::ResolveDevice(flags.device);
  if (!device.ok()) return device.status();
  model::InferenceOptions options;
  options.device = device->str();
  options.precision = flags.precision;
  options.channels_last = flags.memory_format == "channels-last";
  options.fuse_backbone = flags.backbone_kernels != "eager";
  options.winograd_convolutions = flags.backbone_kernels == "winograd";
  options.cuda_graph_step = flags.stream_step == "cuda-graph";
  options.int8_step_weights = flags.stream_step_weights == "int8";
  return options;
}

void LogModels(const engine::ModelRepository& repository) {
  // The first model of each backbone, to say which share one (and its weights and batches).
  std::map<const void*, std::string> first_of_backbone;
  for (const auto& [name, entry] : repository.entries()) {
    const auto [first, inserted] = first_of_backbone.emplace(entry.model->backbone_key(), name);
    spdlog::info("loaded model {} version {} ({} labels{}{}{})", name,
                 entry.model->config().version, entry.model->config().labels.size(),
                 inserted ? "" : absl::StrCat(", backbone shared with ", first->second),
                 entry.model->winograd_backbone() ? ", Winograd 3x3 convolutions" : "",
                 entry.model->int8_step_weights() ? ", int8 stream step weights" : "");
  }
}

engine::EngineOptions EngineOptionsFromFlags(const ServerFlags& flags, int cores,
                                             media::UriAllowlist allowlist) {
  engine::EngineOptions options;
  options.uri_allowlist = std::move(allowlist);
  options.cores = cores;
  options.decode_slots = flags.decode_slots;
  options.arrival_slots = flags.arrival_slots;
  options.head_intra_op_threads = flags.head_intra_op_threads;
  options.batching.max_batch_frames = flags.max_batch_frames;
  options.batching.max_queue_delay = absl::Microseconds(flags.max_queue_delay_us);
  options.batching.embed_while_decoding = flags.embed_while_decoding;
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

void LogBackboneThreads(const engine::ClassifyEngine& engine) {
  const std::vector<int>& cpus = engine.options().batching.cpus;
  const std::shared_ptr<const engine::ModelRepository> repository = engine.repository();
  const torch::Device device = repository->entries().begin()->second.model->device();
  if (!cpus.empty()) {
    spdlog::info("backbone intra-op threads bound one per CPU: {}", absl::StrJoin(cpus, ","));
  } else if (engine.options().bind_backbone_threads && !device.is_cpu()) {
    spdlog::info("backbone intra-op threads left to the kernel: the models run on {}",
                 device.str());
  } else if (engine.options().bind_backbone_threads) {
    spdlog::info(
        "backbone intra-op threads left to the kernel: this process may run on {} CPUs "
        "and budgets {} cores",
        model::AllowedCpus().size(), engine.options().cores);
  }
}

// Reads the token file `path` of `flag` into `tokens` (none when `path` is empty); false, logged,
// when it cannot be used.
bool LoadTokens(const std::string& flag, const std::string& path,
                std::unique_ptr<security::BearerTokens>* tokens) {
  if (path.empty()) return true;
  absl::StatusOr<std::unique_ptr<security::BearerTokens>> loaded =
      security::BearerTokens::Load(path);
  if (!loaded.ok()) {
    spdlog::error("{}: {}", flag, std::string(loaded.status().message()));
    return false;
  }
  *tokens = *std::move(loaded);
  return true;
}

void ReloadTokens(security::BearerTokens* tokens) {
  if (tokens == nullptr) return;
  const absl::StatusOr<int> count = tokens->Reload();
  if (count.ok()) {
    spdlog::info("token file {} reloaded: {} tokens accepted", tokens->path(), *count);
  } else {
    spdlog::error("token file not reloaded, the tokens read before stay in force: {}",
                  std::string(count.status().message()));
  }
}

// Serves until SIGINT or SIGTERM, then drains. Returns the exit code.
int Run(const ServerFlags& flags) {
  using engine::ClassifyEngine;
  using engine::ModelRepository;
  const std::string& repository_dir = flags.model_repository;
  int cores = flags.cores;
  if (cores <= 0) cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  IdleMemoryReleaser::UseOneArena();
  model::TuneHeapForTensors();
  spdlog::info("{}", model::ConfigureTorchThreads(cores));

  absl::StatusOr<model::InferenceOptions> inference = InferenceOptionsFromFlags(flags);
  if (!inference.ok()) {
    spdlog::error("{}", std::string(inference.status().message()));
    return 2;
  }
  spdlog::info("models run on {} in {}, {}, {} backbone", inference->device, inference->precision,
               inference->channels_last ? "channels-last" : "NCHW",
               inference->winograd_convolutions ? "fused (Winograd where it runs)"
               : inference->fuse_backbone       ? "fused"
                                                : "eager");
  absl::StatusOr<std::unique_ptr<ModelRepository>> repository =
      ModelRepository::Load(repository_dir, flags.default_model, *inference);
  if (!repository.ok()) {
    spdlog::error("{}", std::string(repository.status().message()));
    return 1;
  }
  LogModels(**repository);
  IdleMemoryReleaser::TrimNow();

  absl::StatusOr<media::UriAllowlist> allowlist = media::UriAllowlist::Parse(flags.allow_uri);
  if (!allowlist.ok()) {
    spdlog::error("--allow-uri: {}", std::string(allowlist.status().message()));
    return 2;
  }
  std::unique_ptr<security::BearerTokens> tokens;
  std::unique_ptr<security::BearerTokens> metrics_tokens;
  if (!LoadTokens("--token-file", flags.token_file, &tokens) ||
      !LoadTokens("--metrics-token-file", flags.metrics_token_file, &metrics_tokens)) {
    return 2;
  }
  for (const std::string& warning : ExposureWarnings(flags)) spdlog::warn("{}", warning);
  auto registry = std::make_shared<prometheus::Registry>();
  ServerMetrics metrics(*registry);
  auto gate = std::make_shared<security::CallGate>(
      tokens.get(), [&metrics](absl::string_view method, const absl::Status& status) {
        service::RecordRefusedCall(metrics, method, status);
      });
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      security::MakeServerCredentials({flags.tls_cert, flags.tls_key, flags.tls_client_ca}, gate);
  if (!credentials.ok()) {
    spdlog::error("{}", std::string(credentials.status().message()));
    return 2;
  }
  media::LibavSettings libav;
  libav.log_level = MediaLogLevel(flags.media_log_level);
  media::ConfigureLibav(libav);  // before any thread decodes

  const engine::EngineOptions engine_options =
      EngineOptionsFromFlags(flags, cores, *std::move(allowlist));
  absl::StatusOr<std::unique_ptr<ClassifyEngine>> engine =
      ClassifyEngine::Create(engine_options, *std::move(repository), &metrics);
  if (!engine.ok()) {
    spdlog::error("{}", std::string(engine.status().message()));
    return 2;
  }
  LogBackboneThreads(**engine);

  const std::string& host = flags.host;
  MetricsHttpOptions metrics_options;
  metrics_options.host = flags.metrics_host.empty() ? host : flags.metrics_host;
  metrics_options.port = flags.metrics_port;
  metrics_options.tls_cert = flags.metrics_tls_cert;
  metrics_options.tls_key = flags.metrics_tls_key;
  metrics_options.tokens = metrics_tokens.get();
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> metrics_server = MetricsHttpServer::Start(
      metrics_options, {registry, MakeEngineCollector(engine->get()), MakeProcessCollector()});
  if (!metrics_server.ok()) {
    spdlog::error("{}", std::string(metrics_server.status().message()));
    return 1;
  }

  // Busy until the last call in flight is answered and destroyed, and the last stream ends.
  auto releaser = std::make_unique<IdleMemoryReleaser>(
      [engine = engine->get()] {
        const engine::EngineLoad load = engine->load();
        return IdleMemoryReleaser::Load{load.inflight_calls > 0 || !load.active_streams.empty(),
                                        load.inflight_bytes};
      },
      absl::Seconds(1));
  service::ClassifyService service(engine->get(), &metrics);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int grpc_port = 0;
  builder.AddListeningPort(absl::StrCat(host, ":", flags.grpc_port), *credentials, &grpc_port);
  // The upload is one message: allow the configured maximum plus room for the other fields.
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(engine_options.decode.max_input_bytes + (1 << 20)));
  // Pings on a quiet connection find clients that vanished without closing it (a dead NAT
  // entry, a powered-off camera), so that their calls end rather than wait for a timeout.
  if (flags.keepalive_time_s > 0) {
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 1000 * flags.keepalive_time_s);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 1000 * flags.keepalive_timeout_s);
  }
  // What one connection may open at once (HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS).
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, flags.max_streams_per_connection);
  // A connection's age sends the client a GOAWAY: its later calls open a new connection, which a
  // balancer may give to another replica; long-lived streams otherwise stay where they began.
  if (flags.max_connection_age_s > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                               static_cast<int>(1e3 * flags.max_connection_age_s));
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                               flags.max_connection_age_grace_s > 0
                                   ? static_cast<int>(1e3 * flags.max_connection_age_grace_s)
                                   : std::numeric_limits<int>::max());
  }
  service.Register(builder);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || grpc_port == 0) {
    spdlog::error("cannot listen on {}:{}", host, flags.grpc_port);
    return 1;
  }
  // Health answers for the whole server ("") and for our service by name, as probes may ask either.
  server->GetHealthCheckService()->SetServingStatus(v1::VideoClassifier::service_full_name(), true);
  server->GetHealthCheckService()->SetServingStatus(true);

  // Tests and scripts read these two lines to find the ports.
  spdlog::info("gRPC listening on {}:{} ({}{})", host, grpc_port,
               flags.tls_cert.empty()        ? "plaintext"
               : flags.tls_client_ca.empty() ? "TLS"
                                             : "mutual TLS",
               tokens ? ", bearer tokens required" : "");
  spdlog::info("metrics on {}://{}:{}/metrics{}", flags.metrics_tls_cert.empty() ? "http" : "https",
               metrics_options.host, (*metrics_server)->port(),
               metrics_tokens ? " (bearer tokens required)" : "");
  spdlog::info(
      "classify a video from another terminal with: vidclf classify VIDEO --server "
      "localhost:{}",
      grpc_port);

  // Later SIGTERMs, during the drain, land in the pipe unread.
  while (NextSignal() == SIGHUP) {
    spdlog::info("SIGHUP: reloading the model repository {}", repository_dir);
    absl::StatusOr<std::unique_ptr<ModelRepository>> reloaded =
        ModelRepository::Load(repository_dir, flags.default_model, *inference);
    if (reloaded.ok()) {
      LogModels(**reloaded);
      (*engine)->ReplaceRepository(*std::move(reloaded));
      spdlog::info("model repository reloaded");
    } else {
      spdlog::error("reload failed, still serving the models loaded before: {}",
                    std::string(reloaded.status().message()));
    }
    ReloadTokens(tokens.get());
    ReloadTokens(metrics_tokens.get());
  }

  const absl::Duration drain_timeout = absl::Seconds(flags.drain_timeout_s);
  spdlog::info(
      "draining: refusing new calls and ending live streams, up to {} for {} calls in "
      "flight",
      absl::FormatDuration(drain_timeout), (*engine)->load().inflight_calls);
  server->GetHealthCheckService()->SetServingStatus(false);
  const absl::Time drain_start = absl::Now();
  gate->StartDraining();
  (*engine)->StartDraining();
  if (!(*engine)->WaitUntilIdle(absl::Now() + drain_timeout)) {
    spdlog::warn("drain timeout: cancelling {} calls still in flight",
                 (*engine)->load().inflight_calls);
    (*engine)->CancelAll(absl::UnavailableError(
        "the server shut down before the call finished; retry on another replica"));
    (*engine)->WaitUntilIdle(absl::InfiniteFuture());
  }
  // A call that passed the gate just before the drain began reaches its handler, and the engine's
  // UNAVAILABLE, within milliseconds: one still on its way when the server shuts down would be
  // cancelled instead (CANCELLED, which clients do not retry).
  absl::SleepFor(absl::Milliseconds(500) - (absl::Now() - drain_start));
  // Every call has its answer; give the RPCs a moment to send them, then stop. Calls arriving
  // meanwhile get the gate's UNAVAILABLE.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  // What reads the engine goes before it.
  releaser.reset();
  metrics_server->reset();
  engine->reset();
  spdlog::info("stopped");
  return 0;
}

// LibTorch's libraries read these when they are loaded, before main: so the server starts itself
// again with them set, unless the caller chose them.
// - LibTorch's OpenMP threads spin while they wait for work, stealing the cores that decoding
//   shares with them: with OMP_WAIT_POLICY=PASSIVE, one call at a time came back in 686 ms
//   instead of 825 ms (median of 12 calls over three real files), and 8 at a time gave 2.25
//   clips/s instead of 2.08.
// - OpenBLAS's own pool, which runs only the heads' small matrix products here (the backbone's
//   convolutions are oneDNN's, on the OpenMP threads): after each, its workers call sched_yield
//   for a while, a fifth of a core through a run of calls. With OPENBLAS_NUM_THREADS=1 one call at
//   a time on a 720p file took 300 ms instead of 320 (medians of 6 alternating runs of 12 calls,
//   vidclf-e2e-bench).
// - OpenBLAS's kernels, where it does not know the CPU (model/library_settings.h).
void PreferLibrarySettings(char** argv) {
  std::vector<model::EnvironmentSetting> settings = {{"OMP_WAIT_POLICY", "PASSIVE"},
                                                     {"OPENBLAS_NUM_THREADS", "1"}};
  if (auto core_type = model::OpenBlasCoreTypeForThisCpu()) settings.push_back(*core_type);
  model::RestartWithSettings(settings, argv);
}

}  // namespace
}  // namespace vidclf

int main(int argc, char** argv) {
  vidclf::PreferLibrarySettings(argv);
  vidclf::HandleSignals();
  CLI::App app("vidclf-server: serves the models of a repository over gRPC.");
  vidclf::ServerFlags flags;
  vidclf::AddServerFlags(app, &flags);
  CLI11_PARSE(app, argc, argv);
  vidclf::ConfigureLogging(
      flags.log_format == "json" ? vidclf::LogFormat::kJson : vidclf::LogFormat::kText,
      flags.log_level);
  return vidclf::Run(flags);
}
