#include "server/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <prometheus/registry.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "media/decoder_pool.h"
#include "media/nvdec_device.h"
#include "media/uri_redaction.h"
#include "model/onednn_resnet18.h"
#include "model/thread_affinity.h"
#include "model/torch_threads.h"
#include "server/engine/model_repository.h"
#include "server/heap.h"
#include "server/http/inference_rest.h"
#include "server/http/sources_rest.h"
#include "server/http/web_page.h"
#include "server/idle_memory_releaser.h"
#include "server/metrics.h"
#include "server/security/bearer_tokens.h"
#include "server/security/call_gate.h"
#include "server/service/classify_service.h"
#include "server/service/finished_call.h"
#include "server/service/inference_service.h"
#include "server/service/sources_service.h"
#include "server/sources/source_registry.h"
#include "server/sources/source_store.h"
#include "server/startup_warnings.h"

namespace vidclf {
namespace {

// The backbone's kernels as the start-up log names them, for resolved `inference`.
std::string DescribeBackbone(const model::InferenceOptions& inference) {
  if (inference.backbone_kernels == model::BackboneKernels::kEager) return "eager backbone";
  if (inference.device->is_cpu() && inference.precision == model::Precision::kBf16) {
    return "fused backbone on oneDNN's bf16 kernels (this CPU has bf16 instructions)";
  }
  if (inference.device->is_cpu() && inference.precision == model::Precision::kInt8) {
    return "fused backbone on oneDNN's int8 kernels (this CPU has VNNI)";
  }
  if (inference.device->is_cpu() && inference.precision == model::Precision::kAuto) {
    return "fused backbone (Winograd in fp32, oneDNN's bf16 kernels in bf16, its int8 kernels "
           "in int8)";
  }
  if (inference.backbone_kernels != model::BackboneKernels::kWinograd) return "fused backbone";
  if (!inference.device->is_cpu()) return "fused backbone (Winograd where it runs)";
  return model::OneDnnResNet18::WinogradAvailable()
             ? "fused backbone (oneDNN's Winograd 3x3 convolutions)"
             : "fused backbone (LibTorch's convolutions: oneDNN has no Winograd kernels for this "
               "CPU)";
}

int Milliseconds(absl::Duration duration) {
  return static_cast<int>(
      std::min<int64_t>(absl::ToInt64Milliseconds(duration), std::numeric_limits<int>::max()));
}

void LogModels(const engine::ModelRepository& repository) {
  // The first model of each backbone, to say which share one (and its weights and batches).
  std::map<const void*, std::string> first_of_backbone;
  for (const auto& [name, entry] : repository.entries()) {
    const auto [first, inserted] = first_of_backbone.emplace(entry.model->backbone_key(), name);
    const model::PrecisionChoice& precision = entry.model->precision();
    spdlog::info(
        "loaded model {} version {} ({} labels, backbone in {}{}{}{})", name,
        entry.model->config().version, entry.model->config().labels.size(),
        precision.reason.empty() ? model::PrecisionName(precision.precision) : precision.reason,
        inserted ? "" : absl::StrCat(", backbone shared with ", first->second),
        entry.model->winograd_backbone() ? ", Winograd 3x3 convolutions" : "",
        entry.model->int8_step_weights() ? ", int8 stream step weights" : "");
  }
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

// The tokens of the file `path` that `option` names; null when `path` is empty.
absl::StatusOr<std::unique_ptr<security::BearerTokens>> LoadTokens(absl::string_view option,
                                                                   const std::string& path) {
  if (path.empty()) return nullptr;
  absl::StatusOr<std::unique_ptr<security::BearerTokens>> tokens =
      security::BearerTokens::Load(path);
  if (!tokens.ok()) {
    return absl::Status(tokens.status().code(),
                        absl::StrCat(option, ": ", tokens.status().message()));
  }
  return tokens;
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

void ApplyConnectionOptions(const GrpcConnectionOptions& options, grpc::ServerBuilder& builder) {
  if (options.keepalive_time > absl::ZeroDuration()) {
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, Milliseconds(options.keepalive_time));
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                               Milliseconds(options.keepalive_timeout));
  }
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_streams_per_connection);
  if (options.max_connection_age > absl::ZeroDuration()) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                               Milliseconds(options.max_connection_age));
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                               options.max_connection_age_grace > absl::ZeroDuration()
                                   ? Milliseconds(options.max_connection_age_grace)
                                   : std::numeric_limits<int>::max());
  }
}

// The GPU that decodes video, as `options` ask, for models that run on `model_device`; null: the
// CPU. FAILED_PRECONDITION when a named GPU cannot decode.
absl::StatusOr<std::unique_ptr<media::NvdecDevice>> OpenDecodeDevice(
    const DecodeDeviceOptions& options, absl::string_view model_device) {
  using Kind = DecodeDeviceOptions::Kind;
  if (options.kind == Kind::kCpu) {
    spdlog::info("video decodes on the CPU (--decode-device cpu)");
    return nullptr;
  }
  const absl::StatusOr<int> cuda_index =
      options.kind == Kind::kAuto ? media::CudaDeviceIndex(model_device) : options.cuda_index;
  if (!cuda_index.ok()) {
    spdlog::info("video decodes on the CPU: --decode-device auto and the models run on the CPU");
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<media::NvdecDevice>> device =
      media::NvdecDevice::Open(*cuda_index, options.max_sessions);
  if (!device.ok() && options.kind == Kind::kCuda) {
    return absl::Status(device.status().code(),
                        absl::StrCat("--decode-device: ", device.status().message()));
  }
  if (!device.ok()) {
    spdlog::warn("video decodes on the CPU: {}", std::string(device.status().message()));
    return nullptr;
  }
  spdlog::info(
      "video decodes on {} by NVDEC where the codec and profile allow, up to {} "
      "decoders at once",
      (*device)->name(), options.max_sessions);
  return device;
}

}  // namespace

// Declared in the order they are made: each may use those above it, and goes before them.
struct Server::Parts {
  ServerOptions options;
  std::unique_ptr<security::BearerTokens> tokens;
  std::unique_ptr<security::BearerTokens> metrics_tokens;
  std::unique_ptr<security::BearerTokens> admin_tokens;
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  ServerMetrics metrics{*registry};
  std::unique_ptr<media::NvdecDevice> nvdec;
  std::unique_ptr<media::DecoderPool> decoder_pool;  // NVDEC's decoders, kept between calls
  std::shared_ptr<security::CallGate> gate;
  std::unique_ptr<engine::ClassifyEngine> engine;
  std::unique_ptr<sources::SourceRegistry> sources;  // follows sources through the engine
  std::unique_ptr<sources::MqttPublisher> mqtt;      // hears the sources
  std::unique_ptr<MetricsHttpServer> metrics_server;
  std::unique_ptr<http::InferenceRest> rest;
  std::unique_ptr<http::SourcesRest> sources_rest;
  std::unique_ptr<http::HttpServer> http_server;
  std::unique_ptr<IdleMemoryReleaser> releaser;
  std::unique_ptr<service::ClassifyService> service;
  std::unique_ptr<service::InferenceService> inference_service;
  std::unique_ptr<service::SourcesService> sources_service;
  std::unique_ptr<grpc::Server> grpc_server;
  int grpc_port = 0;
  bool drained = false;
};

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options) {
  using engine::ModelRepository;
  if (options.http.port >= 0 && !options.tls.client_ca.empty()) {
    return absl::InvalidArgumentError(
        "--http-port with --tls-client-ca: the HTTP front door does not check client "
        "certificates; serve it without --tls-client-ca (tokens still apply), or leave it out");
  }
  auto parts = std::make_unique<Parts>();
  parts->options = options;
  // The device resolved once, so that every model and the decoder use the same one.
  model::InferenceOptions inference = options.inference;
  absl::StatusOr<torch::Device> device = model::ResolveDevice(inference);
  if (!device.ok()) return device.status();
  inference.device = *device;
  parts->options.inference = inference;  // for Reload
  heap::Prepare();
  spdlog::info("{}; heap: {}", model::ConfigureTorchThreads(options.engine.cores),
               heap::Describe());
  spdlog::info("models run on {} in {}, {}, {}", device->str(),
               inference.precision == model::Precision::kAuto
                   ? "the precision each bundle's evaluation allows (--precision auto)"
                   : model::PrecisionName(inference.precision),
               inference.channels_last ? "channels-last" : "NCHW", DescribeBackbone(inference));
  media::ConfigureLibav(options.libav);  // before any thread decodes
  // Before the models, which would otherwise make the GPU's primary context first.
  absl::StatusOr<std::unique_ptr<media::NvdecDevice>> nvdec =
      OpenDecodeDevice(options.decode_device, device->str());
  if (!nvdec.ok()) return nvdec.status();
  parts->nvdec = *std::move(nvdec);
  // Idle decoders hold at most half the sessions, so that streams of other sizes find some.
  const int idle_decoders =
      std::min(options.decode_device.idle_decoders, options.decode_device.max_sessions / 2);
  if (parts->nvdec != nullptr && idle_decoders > 0) {
    parts->decoder_pool = std::make_unique<media::DecoderPool>(idle_decoders);
  }
  absl::StatusOr<std::unique_ptr<ModelRepository>> repository =
      ModelRepository::Load(options.model_repository, options.default_model, inference);
  if (!repository.ok()) return repository.status();
  LogModels(**repository);
  // Preparing the models (folding the fused backbones) freed temporaries the heap would keep.
  heap::ReleaseFree();

  absl::StatusOr<std::unique_ptr<security::BearerTokens>> tokens =
      LoadTokens("--token-file", options.token_file);
  if (!tokens.ok()) return tokens.status();
  parts->tokens = *std::move(tokens);
  tokens = LoadTokens("--metrics-token-file", options.metrics_token_file);
  if (!tokens.ok()) return tokens.status();
  parts->metrics_tokens = *std::move(tokens);
  tokens = LoadTokens("--admin-token-file", options.admin_token_file);
  if (!tokens.ok()) return tokens.status();
  parts->admin_tokens = *std::move(tokens);
  for (const std::string& warning : ExposureWarnings(options)) spdlog::warn("{}", warning);

  parts->gate = std::make_shared<security::CallGate>(
      parts->tokens.get(), parts->admin_tokens.get(),
      [metrics = &parts->metrics](absl::string_view method, const absl::Status& status) {
        service::RecordRefusedCall(*metrics, method, status);
      });
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      security::MakeServerCredentials(options.tls, parts->gate);
  if (!credentials.ok()) return credentials.status();
  engine::EngineOptions engine_options = options.engine;
  engine_options.decode.nvdec = parts->nvdec.get();
  engine_options.decode.decoder_pool = parts->decoder_pool.get();
  engine_options.decode.hand_over_gpu_pictures = parts->nvdec != nullptr &&
                                                 options.decode_device.convert_on_gpu &&
                                                 parts->nvdec->name() == device->str();
  if (engine_options.decode.hand_over_gpu_pictures) {
    spdlog::info("frames decoded by NVDEC become the models' input on {}", device->str());
  }
  engine_options.decode_on_gpu = options.decode_device.kind != DecodeDeviceOptions::Kind::kCpu;
  engine_options.cpu_when_faster_alone =
      options.decode_device.kind == DecodeDeviceOptions::Kind::kAuto;
  absl::StatusOr<std::unique_ptr<engine::ClassifyEngine>> engine =
      engine::ClassifyEngine::Create(engine_options, *std::move(repository), &parts->metrics);
  if (!engine.ok()) return engine.status();
  parts->engine = *std::move(engine);
  LogBackboneThreads(*parts->engine);
  const engine::EngineOptions& resolved = parts->engine->options();
  spdlog::info("backbone batches of up to {} frames; heads on {} thread{}",
               resolved.batching.max_batch_frames, resolved.head_threads,
               resolved.head_threads == 1 ? "" : "s");

  // Registered sources come back before anything is served, and are scraped with the rest.
  std::unique_ptr<sources::SourceStore> store;
  if (!options.state_dir.empty()) {
    absl::StatusOr<std::unique_ptr<sources::StateDirectoryStore>> directory =
        sources::StateDirectoryStore::Open(options.state_dir);
    if (!directory.ok()) return directory.status();
    store = *std::move(directory);
  }
  sources::RegistryOptions registry_options;
  registry_options.max_sources = options.max_sources;
  absl::StatusOr<std::unique_ptr<sources::SourceRegistry>> registry =
      sources::SourceRegistry::Create(parts->engine.get(), std::move(store), registry_options);
  if (!registry.ok()) return registry.status();
  parts->sources = *std::move(registry);
  std::vector<std::shared_ptr<prometheus::Collectable>> collectors = {
      parts->registry, MakeEngineCollector(parts->engine.get()),
      MakeSourcesCollector(parts->sources.get(), options.source_metrics_limit),
      MakeProcessCollector(), MakeInternalErrorsCollector()};
  if (!options.mqtt.url.empty()) {
    absl::StatusOr<std::unique_ptr<sources::MqttPublisher>> mqtt =
        sources::MqttPublisher::Start(options.mqtt, &parts->sources->fanout());
    if (!mqtt.ok()) return mqtt.status();
    parts->mqtt = *std::move(mqtt);
    collectors.push_back(MakeMqttCollector(parts->mqtt.get()));
    spdlog::info("publishing the sources' updates to MQTT at {} under {}/",
                 media::RedactUri(options.mqtt.url), options.mqtt.topic_prefix);
  }
  MetricsHttpOptions metrics_options = options.metrics;
  metrics_options.tokens = parts->metrics_tokens.get();
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> metrics_server =
      MetricsHttpServer::Start(metrics_options, collectors);
  if (!metrics_server.ok()) return metrics_server.status();
  parts->metrics_server = *std::move(metrics_server);

  if (options.http.port >= 0) {
    parts->rest = std::make_unique<http::InferenceRest>(parts->engine.get(), &parts->metrics);
    parts->sources_rest = std::make_unique<http::SourcesRest>(parts->sources.get(),
                                                              parts->gate.get(), &parts->metrics);
    http::HttpServerOptions http;
    http.name = "HTTP";
    http.host = options.host;
    http.port = options.http.port;
    http.tls_cert = options.tls.cert;
    http.tls_key = options.tls.key;
    http.tls_cert_flag = "--tls-cert";
    http.tls_key_flag = "--tls-key";
    http.tokens = parts->tokens.get();
    const bool page = options.http.page;
    // The page's files hold nothing a token guards, and a browser cannot send one to load them.
    // The Sources API checks its own tokens, admin tokens among them (http/sources_rest.h).
    http.open_to_all = [page](absl::string_view path) {
      return http::InferenceRest::IsHealthCheck(path) || (page && http::IsPageFile(path)) ||
             http::SourcesRest::Serves(path);
    };
    // Behind a balancer every client has its address: no bound per address below the total.
    http.max_connections = http.max_connections_per_address = 256;
    http.idle_timeout_seconds = 30;
    http.max_body_bytes = options.engine.decode.max_input_bytes + (1 << 20);
    http.body_timeout_seconds = options.http.body_timeout_seconds;
    http.allowed_origins = options.http.allowed_origins;
    http.on_refused = [metrics = &parts->metrics](const http::HttpRequest& request,
                                                  const absl::Status& refusal) {
      service::RecordFinishedCall(*metrics, "HttpRefused", "unknown", refusal, 0, request.peer);
    };
    absl::StatusOr<std::unique_ptr<http::HttpServer>> http_server = http::HttpServer::Start(
        http, [rest = parts->rest.get(), sources_rest = parts->sources_rest.get(), page](
                  http::HttpRequest request, http::Responder respond) {
          if (http::SourcesRest::Serves(request.path)) {
            return sources_rest->Handle(std::move(request), std::move(respond));
          }
          if (page && (request.method == "GET" || request.method == "HEAD")) {
            if (std::optional<http::HttpResponse> file = http::ServePage(request.path)) {
              return respond(*std::move(file));
            }
          }
          rest->Handle(std::move(request), std::move(respond));
        });
    if (!http_server.ok()) return http_server.status();
    parts->http_server = *std::move(http_server);
  }

  // Busy until the last call in flight is answered and destroyed, and the last stream ends.
  parts->releaser = std::make_unique<IdleMemoryReleaser>(
      [engine = parts->engine.get()] {
        const engine::EngineLoad load = engine->load();
        return IdleMemoryReleaser::Load{load.inflight_calls > 0 || !load.active_streams.empty(),
                                        load.inflight_bytes};
      },
      absl::Seconds(1));
  parts->service = std::make_unique<service::ClassifyService>(parts->engine.get(), &parts->metrics);
  parts->inference_service =
      std::make_unique<service::InferenceService>(parts->engine.get(), &parts->metrics);
  parts->sources_service =
      std::make_unique<service::SourcesService>(parts->sources.get(), &parts->metrics);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat(options.host, ":", options.grpc_port), *credentials,
                           &parts->grpc_port);
  // The upload is one message: allow the configured maximum plus room for the other fields.
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(options.engine.decode.max_input_bytes + (1 << 20)));
  ApplyConnectionOptions(options.connections, builder);
  parts->service->Register(builder);
  builder.RegisterService(parts->inference_service.get());
  builder.RegisterService(parts->sources_service.get());
  parts->grpc_server = builder.BuildAndStart();
  if (parts->grpc_server == nullptr || parts->grpc_port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.host, ":", options.grpc_port));
  }
  // Health answers for the whole server ("") and for our service by name, as probes may ask either.
  grpc::HealthCheckServiceInterface& health = *parts->grpc_server->GetHealthCheckService();
  health.SetServingStatus(v1::VideoClassifier::service_full_name(), true);
  health.SetServingStatus(true);

  // Tests and scripts read these two lines to find the ports.
  spdlog::info("gRPC listening on {}:{} ({}{})", options.host, parts->grpc_port,
               options.tls.cert.empty()        ? "plaintext"
               : options.tls.client_ca.empty() ? "TLS"
                                               : "mutual TLS",
               parts->tokens ? ", bearer tokens required" : "");
  if (parts->http_server != nullptr) {
    spdlog::info(
        "HTTP listening on {}:{} ({}{}{}{})", options.host, parts->http_server->port(),
        options.tls.cert.empty() ? "plaintext" : "TLS",
        parts->tokens ? ", bearer tokens required" : "",
        options.http.page ? ", the page for people at /" : "",
        options.http.allowed_origins.empty()
            ? ""
            : ", pages from " + absl::StrJoin(options.http.allowed_origins, " ") + " may call it");
  }
  spdlog::info("metrics on {}://{}:{}/metrics{}",
               options.metrics.tls_cert.empty() ? "http" : "https", options.metrics.host,
               parts->metrics_server->port(),
               parts->metrics_tokens ? " (bearer tokens required)" : "");
  spdlog::info(
      "classify a video from another terminal with: vidclf classify VIDEO --server "
      "localhost:{}",
      parts->grpc_port);
  return std::unique_ptr<Server>(new Server(std::move(parts)));
}

Server::Server(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}

Server::~Server() { Drain(); }

int Server::grpc_port() const { return parts_->grpc_port; }

int Server::metrics_port() const { return parts_->metrics_server->port(); }

int Server::http_port() const {
  return parts_->http_server != nullptr ? parts_->http_server->port() : -1;
}

void Server::Reload() {
  const ServerOptions& options = parts_->options;
  spdlog::info("reloading the model repository {}", options.model_repository);
  absl::StatusOr<std::unique_ptr<engine::ModelRepository>> reloaded = engine::ModelRepository::Load(
      options.model_repository, options.default_model, options.inference);
  if (reloaded.ok()) {
    LogModels(**reloaded);
    parts_->engine->ReplaceRepository(*std::move(reloaded));
    spdlog::info("model repository reloaded");
  } else {
    spdlog::error("reload failed, still serving the models loaded before: {}",
                  std::string(reloaded.status().message()));
  }
  ReloadTokens(parts_->tokens.get());
  ReloadTokens(parts_->metrics_tokens.get());
  ReloadTokens(parts_->admin_tokens.get());
}

void Server::Drain() {
  if (parts_->drained) return;
  parts_->drained = true;
  engine::ClassifyEngine& engine = *parts_->engine;
  const absl::Duration drain_timeout = parts_->options.drain_timeout;
  spdlog::info(
      "draining: refusing new calls and ending live streams, up to {} for {} calls in "
      "flight",
      absl::FormatDuration(drain_timeout), engine.load().inflight_calls);
  parts_->grpc_server->GetHealthCheckService()->SetServingStatus(false);
  const absl::Time drain_start = absl::Now();
  parts_->gate->StartDraining();
  // The cameras are let go of first (each sent its TEARDOWN); their registrations stay for the
  // next start.
  parts_->sources->Stop();
  engine.StartDraining();
  if (!engine.WaitUntilIdle(absl::Now() + drain_timeout)) {
    spdlog::warn("drain timeout: cancelling {} calls still in flight",
                 engine.load().inflight_calls);
    engine.CancelAll(absl::UnavailableError(
        "the server shut down before the call finished; retry on another replica"));
    engine.WaitUntilIdle(absl::InfiniteFuture());
  }
  // A call that passed the gate just before the drain began reaches its handler, and the engine's
  // UNAVAILABLE, within milliseconds: one still on its way when the server shuts down would be
  // cancelled instead (CANCELLED, which clients do not retry).
  absl::SleepFor(absl::Milliseconds(500) - (absl::Now() - drain_start));
  // Every call has its answer; give the RPCs a moment to send them, then stop. Calls arriving
  // meanwhile get the gate's UNAVAILABLE.
  parts_->grpc_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  // What reads the engine goes before it; every HTTP request has its answer by now.
  parts_->releaser.reset();
  parts_->http_server.reset();
  parts_->metrics_server.reset();
  parts_->mqtt.reset();
  parts_->sources.reset();
  parts_->engine.reset();
  spdlog::info("stopped");
}

}  // namespace vidclf
