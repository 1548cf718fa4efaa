// How the vidclf client reaches a server, shared by its subcommands.
#ifndef VIDCLF_CLIENT_CONNECTION_H_
#define VIDCLF_CLIENT_CONNECTION_H_

#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

namespace vidclf::client {

struct ConnectionOptions {
  // host:port of the server's gRPC port.
  std::string server = "localhost:50051";
  // Deadline of each call.
  double timeout_seconds = 60;
};

// Adds --server and --timeout-seconds to `command`.
void AddConnectionOptions(CLI::App* command, ConnectionOptions* options);

// A channel that sends messages up to 1 GiB (the server enforces its own upload limit).
std::shared_ptr<grpc::Channel> Connect(const ConnectionOptions& options);

void SetDeadline(grpc::ClientContext& context, const ConnectionOptions& options);

// Prints "vidclf: CODE: message" on stderr and returns the exit code 1.
int Fail(const grpc::Status& status, const ConnectionOptions& options);

}  // namespace vidclf::client

#endif  // VIDCLF_CLIENT_CONNECTION_H_
