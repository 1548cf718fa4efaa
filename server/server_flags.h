// vidclf-server's command line: every field is a --flag with dashes for underscores.
#ifndef VIDCLF_SERVER_SERVER_FLAGS_H_
#define VIDCLF_SERVER_SERVER_FLAGS_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/server.h"
#include "server/service/finished_call.h"

namespace vidclf {

struct ServerFlags {
  std::string model_repository;
  std::string default_model;
  std::string host = "127.0.0.1";
  int grpc_port = 50051;
  int metrics_port = 9464;
  int http_port = -1;
  bool http_page = true;
  std::vector<std::string> http_allow_origin;
  int http_body_timeout_s = 120;
  std::string metrics_host;
  std::string metrics_tls_cert;
  std::string metrics_tls_key;
  std::string metrics_token_file;
  std::string device = "auto";
  std::string decode_device = "cpu";
  int max_nvdec_sessions = 64;
  int idle_nvdec_decoders = 32;
  std::string nvdec_conversion = "gpu";
  std::string precision = "fp32";
  std::string memory_format = "channels-last";
  std::string backbone_kernels = "winograd";
  std::string stream_step = "cuda-graph";
  std::string stream_step_weights = "float32";
  int cores = 0;
  int decode_slots = 0;
  int arrival_slots = 0;
  int head_threads = 1;
  int head_intra_op_threads = 0;
  int max_batch_frames = 0;
  int max_queue_delay_us = 2000;
  bool embed_while_decoding = false;
  int backbone_batches_with_feeds = 0;
  bool bind_backbone_threads = true;
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
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  std::string token_file;
  std::string admin_token_file;
  std::string state_dir;
  int max_sources = 1000;
  int source_metrics_limit = 100;
  std::string mqtt_url;
  std::string mqtt_ca;
  std::string mqtt_topic_prefix = "vidclf";
  std::string mqtt_client_id;
  int mqtt_max_queued = 10000;
  int keepalive_time_s = 60;
  int keepalive_timeout_s = 20;
  int max_streams_per_connection = 256;
  double max_connection_age_s = 0;
  double max_connection_age_grace_s = 0;
  std::string log_format = "text";
  std::string log_level = "info";
  std::string access_log = "errors";
};

void AddServerFlags(CLI::App& app, ServerFlags* flags);

// --access-log's mode.
service::AccessLog AccessLogOf(const ServerFlags& flags);

// The server `flags` ask for, with --device checked (the server resolves auto when it starts) and
// --allow-uri parsed. INVALID_ARGUMENT, naming the flag, for a value that cannot be used;
// FAILED_PRECONDITION for a CUDA device this process cannot use.
absl::StatusOr<ServerOptions> ServerOptionsFromFlags(const ServerFlags& flags);

}  // namespace vidclf

#endif  // VIDCLF_SERVER_SERVER_FLAGS_H_
