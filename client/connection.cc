#include "client/connection.h"

#include <chrono>
#include <iostream>

#include "absl/status/status.h"

namespace vidclf::client {

void AddConnectionOptions(CLI::App* command, ConnectionOptions* options) {
  command->add_option("--server", options->server, "Server address, host:port.")
      ->capture_default_str();
  command->add_option("--timeout-seconds", options->timeout_seconds, "Deadline of each call.")
      ->capture_default_str();
}

std::shared_ptr<grpc::Channel> Connect(const ConnectionOptions& options) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxSendMessageSize(1 << 30);
  arguments.SetMaxReceiveMessageSize(64 << 20);
  return grpc::CreateCustomChannel(options.server, grpc::InsecureChannelCredentials(), arguments);
}

void SetDeadline(grpc::ClientContext& context, const ConnectionOptions& options) {
  context.set_deadline(
      std::chrono::system_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(1e3 * options.timeout_seconds)));
}

int Fail(const grpc::Status& status, const ConnectionOptions& options) {
  std::cerr << "vidclf: "
            << absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())) << ": "
            << (status.error_code() == grpc::StatusCode::UNAVAILABLE
                    ? "server unavailable at " + options.server + ": "
                    : "")
            << status.error_message() << "\n";
  return 1;
}

}  // namespace vidclf::client
