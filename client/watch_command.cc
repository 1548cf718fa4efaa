#include "client/watch_command.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <iostream>

#include "absl/strings/str_format.h"
#include "client/signal_watcher.h"
#include "vidclf/v1/video_classifier.grpc.pb.h"

namespace vidclf::client {

void AddWatchOptions(CLI::App* command, WatchOptions* options) {
  AddFollowOptions(command, &options->follow);
  command->add_option("--max-reconnects", options->max_reconnects,
                      "Failed attempts in a row to follow a dropped source again before giving "
                      "up (default: the server's --source-reconnects, which also caps it).");
  command->add_option("--input-option", options->input_options,
                      "KEY=VALUE for the server to open the source with: rtsp_transport=tcp "
                      "(cameras behind NAT or a firewall), rtsp_flags=prefer_tcp. Repeatable.");
}

int RunWatch(const std::string& uri, const WatchOptions& options) {
  const FollowOptions& follow = options.follow;
  grpc::ClientContext context;
  if (follow.connection.timeout_seconds > 0) SetDeadline(context, follow.connection);
  SignalWatcher signals([&] {
    std::cerr << "vidclf: interrupted; cancelling the watch\n";
    context.TryCancel();
  });
  const auto start = std::chrono::steady_clock::now();

  vidclf::v1::WatchSourceRequest request;
  request.set_uri(uri);
  *request.mutable_config() = StreamConfigFrom(follow);
  if (options.max_reconnects >= 0) {
    request.set_max_reconnects(static_cast<uint32_t>(options.max_reconnects));
  }
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> input_options =
      ParseKeyValues(options.input_options, "--input-option");
  if (!input_options.ok()) return FailBeforeCalling(input_options.status());
  request.mutable_input_options()->insert(input_options->begin(), input_options->end());
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = Connect(follow.connection);
  if (!channel.ok()) return FailBeforeCalling(channel.status());
  auto stub = vidclf::v1::VideoClassifier::NewStub(*channel);
  std::unique_ptr<grpc::ClientReader<vidclf::v1::WatchSourceResponse>> reader =
      stub->WatchSource(&context, request);
  PredictionTally tally;
  int drops = 0;
  bool answered = false;
  vidclf::v1::WatchSourceResponse response;
  while (reader->Read(&response)) {
    answered = true;
    if (response.has_prediction()) {
      tally.Count(response.prediction());
      PrintPrediction(response.prediction(), follow);
    } else if (response.has_source()) {
      if (response.source().kind() == vidclf::v1::SourceEvent::DROPPED) ++drops;
      PrintSourceEvent(response.source(), follow.json);
    }
  }
  const grpc::Status status = reader->Finish();

  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // On stderr with --json, so that stdout holds only messages.
  (follow.json ? std::cerr : std::cout) << absl::StrFormat(
      "%d predictions; %d frames seen, %d embedded; %d dropped; source dropped %d times; "
      "%.1f s\n",
      tally.predictions, tally.frames_seen, tally.frames_embedded, tally.dropped, drops, seconds);
  if (signals.signalled()) return kInterruptedExit;
  // Once the server has answered, UNAVAILABLE speaks of the source, not of the server.
  if (!status.ok() && answered) {
    return FailWith(
        absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message()));
  }
  if (!status.ok()) return Fail(status, follow.connection);
  return 0;
}

}  // namespace vidclf::client
