// vidclf-server: turns its command line into a Server (server/server.h) and runs it until SIGINT or
// SIGTERM, then drains and exits 0. SIGHUP reloads the model repository and the token files.
// Exits 2 when a flag cannot be used, 1 when the server cannot start.
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>
#include <torch/version.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <string>
#include <vector>

#include "common/version.h"
#include "media/libav_settings.h"
#include "model/library_settings.h"
#include "server/heap.h"
#include "server/logging.h"
#include "server/server.h"
#include "server/server_flags.h"
#include "server/signal_pipe.h"

namespace vidclf {
namespace {

// LibTorch's libraries read these when they are loaded, before main: so the server starts itself
// again with them set, unless the caller chose them. OpenMP's threads would spin while they wait,
// stealing the cores that decoding shares; OpenBLAS's pool, which runs only the heads' small
// products, would yield after each; OpenBLAS's kernels, where it does not know the CPU. Their
// effect: docs/code-measurements.md, "Library settings the server restarts itself with".
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
  app.set_version_flag(
      "--version", vidclf::VersionText("vidclf-server", {{"LibTorch", TORCH_VERSION},
                                                         {"FFmpeg", vidclf::media::LibavVersion()},
                                                         {"gRPC", grpc::Version()},
                                                         {"heap", vidclf::heap::Describe()}}));
  CLI11_PARSE(app, argc, argv);
  vidclf::ConfigureLogging(
      flags.log_format == "json" ? vidclf::LogFormat::kJson : vidclf::LogFormat::kText,
      flags.log_level);
  vidclf::service::SetAccessLog(vidclf::AccessLogOf(flags));

  absl::StatusOr<vidclf::ServerOptions> options = vidclf::ServerOptionsFromFlags(flags);
  if (!options.ok()) {
    spdlog::error("{}", std::string(options.status().message()));
    return 2;
  }
  absl::StatusOr<std::unique_ptr<vidclf::Server>> server = vidclf::Server::Start(*options);
  if (!server.ok()) {
    spdlog::error("{}", std::string(server.status().message()));
    return 1;
  }
  // Later SIGTERMs, during the drain, land in the pipe unread.
  while (vidclf::NextSignal() == SIGHUP) (*server)->Reload();
  (*server)->Drain();
  return 0;
}
