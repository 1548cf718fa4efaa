// One vidclf server: the models of a repository served over gRPC (vidclf.v1.VideoClassifier, the
// Open Inference Protocol's inference.GRPCInferenceService, the standard health service and
// server reflection) and, when asked, the protocol's HTTP/REST endpoints, with Prometheus metrics
// over HTTP.
//
// Drain: health answers NOT_SERVING and ServerReady false (so load balancers stop sending) and
// new calls get UNAVAILABLE (so clients retry on another replica); calls in flight have the drain
// timeout to finish, those still running then are cancelled. Reload: the model repository and the
// token files are read again and served from then on; calls in flight finish on the models they
// started with.
#ifndef VIDCLF_SERVER_SERVER_H_
#define VIDCLF_SERVER_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "media/libav_settings.h"
#include "model/video_model.h"
#include "server/engine/classify_engine.h"
#include "server/metrics_http_server.h"
#include "server/security/server_credentials.h"
#include "server/sources/mqtt_publisher.h"

namespace vidclf {

// How gRPC treats connections.
struct GrpcConnectionOptions {
  // Pings on a quiet connection find clients that vanished without closing it (a dead NAT entry,
  // a powered-off camera), so that their calls end rather than wait for a timeout. Zero: none.
  absl::Duration keepalive_time = absl::Seconds(60);
  absl::Duration keepalive_timeout = absl::Seconds(20);
  // What one connection may open at once (HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS).
  int max_streams_per_connection = 256;
  // A connection's age sends the client a GOAWAY: its later calls open a new connection, which a
  // balancer may give to another replica. Zero: no limit; a zero grace: calls may take any time.
  absl::Duration max_connection_age = absl::ZeroDuration();
  absl::Duration max_connection_age_grace = absl::ZeroDuration();
};

// Where video is decoded (--decode-device).
struct DecodeDeviceOptions {
  enum class Kind {
    kAuto,  // NVDEC on the GPU the models run on, where it opens; else the CPU
    kCpu,
    kCuda,  // NVDEC on GPU cuda_index, or the server does not start
  };
  // The CPU by default: a machine without a GPU would count every call as a fallback, and one
  // 720p H.264 call alone decodes faster on 16 cores than on one NVDEC decoder; under concurrent
  // calls NVDEC answers more for a fifth of the CPU time (docs/gpu-serving-benchmark.md). kAuto
  // decodes such a lone call on the CPU (EngineOptions::cpu_when_faster_alone).
  Kind kind = Kind::kCpu;
  int cuda_index = 0;
  // NVDEC decoders open at once; past them, calls and streams decode on the CPU.
  int max_sessions = 64;
  // Decoders kept set up between calls (media::DecoderPool), at most half of max_sessions; 0:
  // none.
  int idle_decoders = 32;
  // NVDEC's frames are converted to the model's input on the GPU they were decoded on when the
  // models run there (pipeline/frame_tensor.h); false: on the host, by libswscale.
  bool convert_on_gpu = true;
};

// The HTTP door (http/): the Open Inference Protocol's REST endpoints, curl's upload and the page
// for people, on the server's host with its certificate and tokens.
struct HttpDoorOptions {
  int port = -1;     // 0: a free one; -1: no HTTP door
  bool page = true;  // the page for people at /
  // Origins whose pages may call it with fetch (http/cors.h).
  std::vector<std::string> allowed_origins;
  // How long a request's body may take to arrive after its headers.
  int body_timeout_seconds = 120;
};

struct ServerOptions {
  // REPOSITORY/<model>/<version>/ bundles, and the model that calls naming none get.
  std::string model_repository;
  std::string default_model;
  model::InferenceOptions inference;
  DecodeDeviceOptions decode_device;
  engine::EngineOptions engine;
  media::LibavSettings libav;
  // gRPC's address; port 0 takes a free one (grpc_port() says which).
  std::string host = "127.0.0.1";
  int grpc_port = 50051;
  HttpDoorOptions http;
  security::TlsFiles tls;
  // Bearer tokens that every call but health checks must carry; empty: none.
  std::string token_file;
  // Bearer tokens that changing the registered sources needs (security/call_gate.h); empty:
  // none, and such calls are refused when token_file is set.
  std::string admin_token_file;
  // Where the registered sources are kept across restarts (sources/source_store.h); empty: not
  // kept. Sources registered at most.
  std::string state_dir;
  int max_sources = 1000;
  // Sources with metrics of their own (by id); the others count only in vidclf_sources.
  int source_metrics_limit = 100;
  // Where the sources' updates are published (sources/mqtt_publisher.h); an empty url: nowhere.
  sources::MqttOptions mqtt;
  GrpcConnectionOptions connections;
  // /metrics; its `tokens` come from metrics_token_file (empty: none).
  MetricsHttpOptions metrics;
  std::string metrics_token_file;
  absl::Duration drain_timeout = absl::Seconds(30);
};

class Server {
 public:
  // Sets up the process (heap, LibTorch threads, libav), loads the models and token files, and
  // serves until Drain. Errors say which option or file could not be used.
  static absl::StatusOr<std::unique_ptr<Server>> Start(const ServerOptions& options);
  // Drains first when Drain was not called.
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // The ports listened on (a free one where the options said 0); metrics_port and http_port
  // until Drain (http_port -1 when there is none).
  int grpc_port() const;
  int metrics_port() const;
  int http_port() const;

  // Loads the model repository and the token files again. What cannot be loaded is logged, and
  // what was loaded before stays in force.
  void Reload();

  // Refuses new calls, gives those in flight the drain timeout, cancels the rest and stops.
  void Drain();

 private:
  struct Parts;
  explicit Server(std::unique_ptr<Parts> parts);
  std::unique_ptr<Parts> parts_;
};

}  // namespace vidclf

#endif  // VIDCLF_SERVER_SERVER_H_
