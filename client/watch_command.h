// vidclf watch: asks the server to follow a live source it pulls itself (WatchSource), and
// prints its predictions and what becomes of the source as they arrive.
#ifndef VIDCLF_CLIENT_WATCH_COMMAND_H_
#define VIDCLF_CLIENT_WATCH_COMMAND_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "client/follow_options.h"

namespace vidclf::client {

struct WatchOptions {
  FollowOptions follow;
  // Failed attempts in a row to follow a dropped source again; negative: the server's default.
  int max_reconnects = -1;
  // KEY=VALUE FFmpeg input options for the server to open the source with (rtsp_transport=tcp).
  std::vector<std::string> input_options;
};

// Adds the watch subcommand's options (and the connection's) to `command`.
void AddWatchOptions(CLI::App* command, WatchOptions* options);

// Follows `uri` until the server ends the call or SIGINT/SIGTERM cancels it. Prints one line per
// prediction and source event, and a summary. Returns 0 when the call ended OK (a source of
// known size read to its end), 130 when interrupted, 1 on any other failure.
int RunWatch(const std::string& uri, const WatchOptions& options);

}  // namespace vidclf::client

#endif  // VIDCLF_CLIENT_WATCH_COMMAND_H_
