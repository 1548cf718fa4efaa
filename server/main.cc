// vidclf-server: loads a model repository and serves vidclf.v1.VideoClassifier over gRPC, with the
// standard health service, server reflection and Prometheus metrics.
//
// Shutdown sequence on SIGINT/SIGTERM: mark NOT_SERVING (so load balancers stop sending), stop
// accepting RPCs and let those in flight finish for up to --shutdown-grace-seconds, then stop the
// engine (which finishes the requests it had queued) and exit.
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <prometheus/registry.h>

#include <csignal>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/command_line.h"
#include "media/uri_allowlist.h"
#include "model/video_model.h"
#include "server/engine/classify_engine.h"
#include "server/engine/model_repository.h"
#include "server/metrics.h"
#include "server/metrics_http_server.h"
#include "server/service/classify_service.h"

extern "C" {
#include <libavutil/log.h>
}

ABSL_FLAG(std::string, model_repository, "", "Directory of model bundles: DIR/<name>/<version>/.");
ABSL_FLAG(std::string, default_model, "", "Model for requests that name none (default: first).");
ABSL_FLAG(std::string, host, "0.0.0.0", "Address to listen on.");
ABSL_FLAG(int, grpc_port, 50051, "gRPC port; 0 picks a free one (printed at start).");
ABSL_FLAG(int, metrics_port, 9464, "Prometheus /metrics port; 0 picks a free one.");
ABSL_FLAG(std::string, device, "auto", "auto (first CUDA GPU if any, else CPU), cpu or cuda:N.");
ABSL_FLAG(std::string, precision, "fp32", "Backbone precision: fp32, or on CUDA fp16 or bf16.");
ABSL_FLAG(
    std::string, memory_format, "channels-last",
    "Backbone layout: channels-last (faster on CPU too; docs/backbone-benchmark.md) or nchw.");
ABSL_FLAG(int, workers, 2, "Requests processed at once.");
ABSL_FLAG(int, torch_threads, 0, "LibTorch intra-op threads (0: cores / workers, at least 1).");
ABSL_FLAG(int, max_queued_requests, 64, "Requests waiting beyond this get RESOURCE_EXHAUSTED.");
ABSL_FLAG(int, max_upload_mib, 64, "Largest accepted video upload, in MiB.");
ABSL_FLAG(int, decode_timeout_ms, 30000,
          "Wall-clock budget for decoding one video (DEADLINE_EXCEEDED past it); 0: none.");
ABSL_FLAG(int, shutdown_grace_seconds, 10, "Time given to RPCs in flight at shutdown.");
ABSL_FLAG(std::vector<std::string>, allow_uri, {},
          "Comma-separated URI prefixes that requests may ask the server to pull video from, "
          "e.g. https://media.example.com/clips/,file:///srv/videos/ (default: none).");
ABSL_FLAG(std::string, media_log_level, "error",
          "FFmpeg's log level on stderr: quiet, error, warning, info or debug.");

namespace {

absl::Notification shutdown_requested;

void OnSignal(int) {
  // Only async-signal-safe work here: the main thread waits on the notification.
  if (!shutdown_requested.HasBeenNotified()) shutdown_requested.Notify();
}

absl::StatusOr<int> MediaLogLevel(const std::string& name) {
  static const auto& kLevels = *new std::map<std::string, int>{{"quiet", AV_LOG_QUIET},
                                                               {"error", AV_LOG_ERROR},
                                                               {"warning", AV_LOG_WARNING},
                                                               {"info", AV_LOG_INFO},
                                                               {"debug", AV_LOG_DEBUG}};
  const auto found = kLevels.find(name);
  if (found == kLevels.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--media-log-level must be quiet, error, warning, info or debug, not '", name, "'"));
  }
  return found->second;
}

// Resolves --device (so that the log names the device actually used) and --memory-format.
absl::StatusOr<vidclf::model::InferenceOptions> InferenceOptionsFromFlags() {
  absl::StatusOr<torch::Device> device = vidclf::model::ResolveDevice(absl::GetFlag(FLAGS_device));
  if (!device.ok()) return device.status();
  vidclf::model::InferenceOptions options;
  options.device = device->str();
  options.precision = absl::GetFlag(FLAGS_precision);
  const std::string memory_format = absl::GetFlag(FLAGS_memory_format);
  if (memory_format != "channels-last" && memory_format != "nchw") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown --memory-format \"", memory_format, "\"; use channels-last or nchw"));
  }
  options.channels_last = memory_format == "channels-last";
  return options;
}

int Run() {
  using vidclf::engine::ClassifyEngine;
  using vidclf::engine::ModelRepository;
  const std::string repository_dir = absl::GetFlag(FLAGS_model_repository);
  if (repository_dir.empty()) {
    std::cerr << "vidclf-server: --model-repository DIR is required\n";
    return 2;
  }
  const int workers = absl::GetFlag(FLAGS_workers);
  int torch_threads = absl::GetFlag(FLAGS_torch_threads);
  if (torch_threads <= 0) {
    torch_threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / workers);
  }
  std::cout << vidclf::model::ConfigureTorchThreads(torch_threads) << std::endl;

  absl::StatusOr<vidclf::model::InferenceOptions> inference = InferenceOptionsFromFlags();
  if (!inference.ok()) {
    std::cerr << "vidclf-server: " << inference.status().message() << "\n";
    return 2;
  }
  std::cout << "models run on " << inference->device << " in " << inference->precision << ", "
            << (inference->channels_last ? "channels-last" : "NCHW") << std::endl;
  absl::StatusOr<std::unique_ptr<ModelRepository>> repository =
      ModelRepository::Load(repository_dir, absl::GetFlag(FLAGS_default_model), *inference);
  if (!repository.ok()) {
    std::cerr << "vidclf-server: " << repository.status().message() << "\n";
    return 1;
  }
  for (const vidclf::model::VideoModel* model : (*repository)->models()) {
    std::cout << "loaded model " << model->config().name << " version " << model->config().version
              << " (" << model->config().labels.size() << " labels)" << std::endl;
  }

  absl::StatusOr<vidclf::media::UriAllowlist> allowlist =
      vidclf::media::UriAllowlist::Parse(absl::GetFlag(FLAGS_allow_uri));
  if (!allowlist.ok()) {
    std::cerr << "vidclf-server: --allow-uri: " << allowlist.status().message() << "\n";
    return 2;
  }
  if (auto level = MediaLogLevel(absl::GetFlag(FLAGS_media_log_level)); level.ok()) {
    av_log_set_level(*level);
  } else {
    std::cerr << "vidclf-server: " << level.status().message() << "\n";
    return 2;
  }

  vidclf::engine::EngineOptions engine_options;
  engine_options.uri_allowlist = *std::move(allowlist);
  engine_options.workers = workers;
  engine_options.max_queued_requests = absl::GetFlag(FLAGS_max_queued_requests);
  engine_options.decode.max_input_bytes = static_cast<int64_t>(absl::GetFlag(FLAGS_max_upload_mib))
                                          << 20;
  engine_options.decode.decode_timeout_ms = absl::GetFlag(FLAGS_decode_timeout_ms);
  absl::StatusOr<std::unique_ptr<ClassifyEngine>> engine =
      ClassifyEngine::Create(engine_options, repository->get());
  if (!engine.ok()) {
    std::cerr << "vidclf-server: " << engine.status().message() << "\n";
    return 2;
  }

  const std::string host = absl::GetFlag(FLAGS_host);
  auto registry = std::make_shared<prometheus::Registry>();
  vidclf::ServerMetrics metrics(*registry);
  absl::StatusOr<std::unique_ptr<vidclf::MetricsHttpServer>> metrics_server =
      vidclf::MetricsHttpServer::Start(host, absl::GetFlag(FLAGS_metrics_port),
                                       {registry, vidclf::MakeProcessCollector()});
  if (!metrics_server.ok()) {
    std::cerr << "vidclf-server: " << metrics_server.status().message() << "\n";
    return 1;
  }

  vidclf::service::ClassifyService service(engine->get(), repository->get(), &metrics);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int grpc_port = 0;
  builder.AddListeningPort(absl::StrCat(host, ":", absl::GetFlag(FLAGS_grpc_port)),
                           grpc::InsecureServerCredentials(), &grpc_port);
  // The upload is one message: allow the configured maximum plus room for the other fields.
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(engine_options.decode.max_input_bytes + (1 << 20)));
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || grpc_port == 0) {
    std::cerr << "vidclf-server: cannot listen on " << host << ":" << absl::GetFlag(FLAGS_grpc_port)
              << "\n";
    return 1;
  }
  // Health answers for the whole server ("") and for our service by name, as probes may ask either.
  server->GetHealthCheckService()->SetServingStatus(
      vidclf::v1::VideoClassifier::service_full_name(), true);
  server->GetHealthCheckService()->SetServingStatus(true);

  // Tests and scripts read these two lines to find the ports.
  std::cout << "gRPC listening on " << host << ":" << grpc_port << std::endl;
  std::cout << "metrics on http://" << host << ":" << (*metrics_server)->port() << "/metrics"
            << std::endl;
  std::cout << "classify a video from another terminal with:\n  vidclf classify VIDEO --server "
            << "localhost:" << grpc_port << std::endl;

  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  shutdown_requested.WaitForNotification();
  std::cout << "shutting down" << std::endl;
  server->GetHealthCheckService()->SetServingStatus(false);
  server->Shutdown(std::chrono::system_clock::now() +
                   std::chrono::seconds(absl::GetFlag(FLAGS_shutdown_grace_seconds)));
  engine->reset();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  vidclf::ParseCommandLine(argc, argv,
                           "vidclf-server --model-repository DIR [--grpc-port 50051] "
                           "[--metrics-port 9464] [--device auto|cpu|cuda:N]");
  return Run();
}
