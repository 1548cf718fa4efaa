#include "client/connection.h"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace vidclf::client {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& flag, const std::string& path) {
  std::ifstream file(path);
  if (!file) return absl::NotFoundError(absl::StrCat(flag, ": cannot read ", path));
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

// The first token of the file: the first word of its first line that is neither blank nor a
// comment (so a line of the server's token file, "TOKEN expires=...", serves as well).
absl::StatusOr<std::string> ReadToken(const std::string& path) {
  absl::StatusOr<std::string> contents = ReadFile("--token-file", path);
  if (!contents.ok()) return contents.status();
  for (absl::string_view line : absl::StrSplit(*contents, '\n')) {
    const std::vector<absl::string_view> words =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r\v\f"), absl::SkipEmpty());
    if (!words.empty() && !absl::StartsWith(words[0], "#")) return std::string(words[0]);
  }
  return absl::InvalidArgumentError(absl::StrCat("--token-file: ", path, " holds no token"));
}

// Sends the bearer token with every call the channel makes, whatever its credentials: gRPC's own
// call credentials would refuse a plaintext channel, which a server behind a TLS-terminating
// proxy or mesh listens on.
class BearerTokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit BearerTokenInterceptor(const std::string* authorization)
      : authorization_(authorization) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace("authorization", *authorization_);
    }
    methods->Proceed();
  }

 private:
  const std::string* const authorization_;
};

class BearerTokenInterceptorFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenInterceptorFactory(std::string token)
      : authorization_(absl::StrCat("Bearer ", token)) {}

  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* /*info*/) override {
    return new BearerTokenInterceptor(&authorization_);
  }

 private:
  const std::string authorization_;  // lives as long as the channel, which owns the factory
};

// Calls refused with UNAVAILABLE (a replica that is draining, or one that stopped before the call
// reached it) are tried again, which behind a balancer reaches another replica. Only methods
// whose request is one message: classification has no side effects, so a second try is safe.
// Five attempts, gRPC's most: a round-robin balancer may hand a retry to the same draining
// replica, each time with a chance of one in the number of replicas.
constexpr char kRetryServiceConfig[] = R"json({
  "methodConfig": [{
    "name": [{"service": "vidclf.v1.VideoClassifier", "method": "Classify"},
             {"service": "vidclf.v1.VideoClassifier", "method": "ListModels"},
             {"service": "vidclf.v1.VideoClassifier", "method": "GetModel"}],
    "retryPolicy": {"maxAttempts": 5, "initialBackoff": "0.2s", "maxBackoff": "2s",
                    "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}
  }]
})json";

bool UsesTls(const ConnectionOptions& options) {
  return options.tls || !options.tls_ca.empty() || !options.tls_cert.empty() ||
         !options.tls_key.empty();
}

// What a connection refused for want (or excess) of TLS looks like, and what to do about it:
// a TLS port closes a plaintext connection without a word ("Socket closed"); a plaintext port
// answers a TLS handshake with bytes that are no TLS record.
std::string TlsHint(const grpc::Status& status, const ConnectionOptions& options) {
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return "";
  if (!UsesTls(options) && absl::StrContains(status.error_message(), "Socket closed")) {
    return " (the server may expect TLS: add --tls, or --tls-ca FILE for a private CA)";
  }
  if (UsesTls(options) && absl::StrContains(status.error_message(), "wrong version number")) {
    return " (the server may not serve TLS: leave out the --tls options)";
  }
  return "";
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> Credentials(
    const ConnectionOptions& options) {
  if (!UsesTls(options)) return grpc::InsecureChannelCredentials();
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  grpc::SslCredentialsOptions ssl;
  for (auto [flag, path, pem] : {std::tuple{"--tls-ca", &options.tls_ca, &ssl.pem_root_certs},
                                 std::tuple{"--tls-cert", &options.tls_cert, &ssl.pem_cert_chain},
                                 std::tuple{"--tls-key", &options.tls_key, &ssl.pem_private_key}}) {
    if (path->empty()) continue;
    absl::StatusOr<std::string> contents = ReadFile(flag, *path);
    if (!contents.ok()) return contents.status();
    *pem = *std::move(contents);
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace

ConnectionOptions WithoutDeadline() {
  ConnectionOptions options;
  options.timeout_seconds = 0;
  return options;
}

// The environment gives the defaults before parsing, not CLI11's envname: CLI11 2.1 also applies
// an envname to the options of subcommands that were not given, and `vidclf sources`'
// subcommands share one ConnectionOptions, so the environment overwrote a --server given.
void AddConnectionOptions(CLI::App* command, ConnectionOptions* options) {
  if (const char* server = std::getenv("VIDCLF_SERVER"); server != nullptr && *server != '\0') {
    options->server = server;
  }
  if (const char* token = std::getenv("VIDCLF_TOKEN_FILE"); token != nullptr && *token != '\0') {
    options->token_file = token;
  }
  command->add_option("--server", options->server, "Server address, host:port ($VIDCLF_SERVER).")
      ->capture_default_str();
  command->add_option("--timeout-seconds", options->timeout_seconds, "Deadline of each call.")
      ->capture_default_str();
  command->add_flag("--tls", options->tls,
                    "Connect over TLS, verifying the server with the system's CAs.");
  command->add_option("--tls-ca", options->tls_ca,
                      "PEM CA bundle that signed the server's certificate (implies --tls).");
  command->add_option("--tls-cert", options->tls_cert,
                      "PEM client certificate, for servers that ask for one (mutual TLS).");
  command->add_option("--tls-key", options->tls_key, "PEM private key of --tls-cert.");
  command->add_option("--tls-server-name", options->tls_server_name,
                      "Name the server's certificate must hold, when not --server's host.");
  command->add_option(
      "--token-file", options->token_file,
      "File holding the bearer token to send (the first word of its first line that "
      "is not a comment; $VIDCLF_TOKEN_FILE).");
}

void AddProtocolOption(CLI::App* command, std::string* protocol) {
  command
      ->add_option("--protocol", *protocol,
                   "vidclf (vidclf.v1's RPCs) or v2 (the Open Inference Protocol's, as Triton's "
                   "and KServe's clients call them).")
      ->capture_default_str()
      ->check(CLI::IsMember({"vidclf", "v2"}));
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> Connect(const ConnectionOptions& options) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials = Credentials(options);
  if (!credentials.ok()) return credentials.status();
  grpc::ChannelArguments arguments;
  arguments.SetMaxSendMessageSize(1 << 30);
  arguments.SetMaxReceiveMessageSize(64 << 20);
  arguments.SetServiceConfigJSON(kRetryServiceConfig);
  // gRPC retries only a call whose request it still holds: room for a whole video (the server's
  // default --max-upload-mib is 64).
  arguments.SetInt(GRPC_ARG_PER_RPC_RETRY_BUFFER_SIZE, 128 << 20);
  if (!options.tls_server_name.empty()) {
    arguments.SetSslTargetNameOverride(options.tls_server_name);
  }
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  if (!options.token_file.empty()) {
    absl::StatusOr<std::string> token = ReadToken(options.token_file);
    if (!token.ok()) return token.status();
    interceptors.push_back(std::make_unique<BearerTokenInterceptorFactory>(*std::move(token)));
  }
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      options.server, *credentials, arguments, std::move(interceptors));
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
            << status.error_message() << TlsHint(status, options) << "\n";
  return 1;
}

int FailBeforeCalling(const absl::Status& status) {
  std::cerr << "vidclf: " << status.message() << "\n";
  return 2;
}

}  // namespace vidclf::client
