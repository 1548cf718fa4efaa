// vidclf stream: follows a live feed. The source (a camera, a URL, a file or standard input) is
// remuxed as it is read into a streamable container (media/feed_remuxer.h) and sent over one
// StreamClassify call (or one sequence of a ModelStreamInfer call, --protocol v2), while the
// server's predictions are printed as they arrive.
#ifndef VIDCLF_CLIENT_STREAM_COMMAND_H_
#define VIDCLF_CLIENT_STREAM_COMMAND_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "client/follow_options.h"

namespace vidclf::client {

struct StreamOptions {
  FollowOptions follow;
  // The RPC: "vidclf" (StreamClassify) or "v2" (the Open Inference Protocol's ModelStreamInfer).
  std::string protocol = "vidclf";
  // Send the source no faster than it plays (for a file; a camera is paced by itself).
  bool realtime = false;
  // The source's format or device, as `ffmpeg -f` takes it; empty: guessed.
  std::string input_format;
  // KEY=VALUE options for the source's demuxer, device or protocol (video_size=640x480).
  std::vector<std::string> input_options;
  // Largest chunk of the feed sent in one message, in KiB.
  int chunk_kib = 64;
};

// Adds the stream subcommand's options (and the connection's) to `command`.
void AddStreamOptions(CLI::App* command, StreamOptions* options);

// Streams `source` until it ends or breaks off (then waits for the server's last predictions),
// the server ends the call, or SIGINT/SIGTERM cancels it. Prints one line per prediction and a
// summary. Returns 0 when the feed ended and the call with it OK, 130 when interrupted, 1 on any
// other failure (with its status code and message on stderr).
int RunStream(const std::string& source, const StreamOptions& options);

}  // namespace vidclf::client

#endif  // VIDCLF_CLIENT_STREAM_COMMAND_H_
