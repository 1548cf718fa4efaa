// How the vidclf client reaches a server, shared by its subcommands.
#ifndef VIDCLF_CLIENT_CONNECTION_H_
#define VIDCLF_CLIENT_CONNECTION_H_

#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace vidclf::client {

struct ConnectionOptions {
  // host:port of the server's gRPC port.
  std::string server = "localhost:50051";
  // Deadline of each call.
  double timeout_seconds = 60;
  // TLS: on with `tls`, or with any file below. `tls_ca` verifies the server (default: the
  // system's roots); `tls_cert` and `tls_key` are the client's certificate, for mutual TLS.
  bool tls = false;
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  // The name the server's certificate must carry, when it is not the host of `server`.
  std::string tls_server_name;
  // A file whose first token is sent as "authorization: Bearer TOKEN" on every call.
  std::string token_file;
};

// The defaults with no deadline: for calls that run as long as their video or feed does.
ConnectionOptions WithoutDeadline();

// Adds --server, --timeout-seconds, and the TLS and token options to `command`.
void AddConnectionOptions(CLI::App* command, ConnectionOptions* options);

// A channel that sends messages up to 1 GiB (the server enforces its own upload limit), over TLS
// and with the token when the options ask, and that tries unary calls refused with UNAVAILABLE
// again (up to 5 attempts). An error names a file that cannot be read.
absl::StatusOr<std::shared_ptr<grpc::Channel>> Connect(const ConnectionOptions& options);

// Adds --protocol: "vidclf" (vidclf.v1's RPCs) or "v2" (the Open Inference Protocol's).
void AddProtocolOption(CLI::App* command, std::string* protocol);

void SetDeadline(grpc::ClientContext& context, const ConnectionOptions& options);

// Prints "vidclf: CODE: message" on stderr and returns the exit code 1.
int Fail(const grpc::Status& status, const ConnectionOptions& options);

// For an error before any call (Connect's, a list that cannot be read): prints "vidclf: message"
// on stderr and returns the exit code 2.
int FailBeforeCalling(const absl::Status& status);

}  // namespace vidclf::client

#endif  // VIDCLF_CLIENT_CONNECTION_H_
