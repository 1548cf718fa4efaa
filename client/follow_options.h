// What the subcommands that follow a live feed (stream, watch) share: the head and emit options
// of the call, and how each prediction is printed.
#ifndef VIDCLF_CLIENT_FOLLOW_OPTIONS_H_
#define VIDCLF_CLIENT_FOLLOW_OPTIONS_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/connection.h"
#include "vidclf/v1/video_classifier.pb.h"

namespace vidclf::client {

struct FollowOptions {
  // The call has no deadline unless connection.timeout_seconds > 0: a feed runs until stopped.
  ConnectionOptions connection = WithoutDeadline();
  // Empty: the server's default model.
  std::string model;
  // Attention to run a transformer model with instead of its own, if its bundle allows.
  std::string attention;
  int top_k = 5;
  // A prediction every this many embedded frames (0: the server's default, 1), or each time the
  // media time passes another multiple of emit_every_seconds (when > 0).
  int emit_every_frames = 0;
  double emit_every_seconds = 0;
  // Embed every embed_stride-th frame (0: the server's default, every frame).
  int embed_stride = 0;
  // Segment events (when each label's segments start and end) with these bounds, beside the
  // predictions or, with events_only, instead of them.
  bool segment_events = false;
  float segment_threshold = 0.5f;
  float segment_hysteresis = 0.1f;
  double segment_min_seconds = 1;
  double segment_max_gap_seconds = 0.5;
  bool events_only = false;
  // One JSON object per prediction and line on stdout, instead of text.
  bool json = false;
};

// Adds the options above (and the connection's) to `command`.
void AddFollowOptions(CLI::App* command, FollowOptions* options);

// The call's config; its input kind is left unspecified.
vidclf::v1::StreamConfig StreamConfigFrom(const FollowOptions& options);

// What the predictions said, for the summary line.
struct PredictionTally {
  int64_t predictions = 0;
  uint64_t frames_seen = 0;
  uint64_t frames_embedded = 0;
  int64_t dropped = 0;
  void Count(const vidclf::v1::StreamPrediction& prediction);
};

// Prints `message` on stdout, flushed at once (a live feed's reader, a pipe or a log, wants each
// line as it comes): one JSON line with `options.json`, else a line of text for a prediction
// (unless events_only) and one for each segment event it carries.
void PrintPrediction(const vidclf::v1::StreamPrediction& prediction, const FollowOptions& options);
void PrintSourceEvent(const vidclf::v1::SourceEvent& event, bool json);

// "vidclf: CODE: message" on stderr, URIs in it redacted; returns 1.
int FailWith(const absl::Status& status);

// `message` as one line of JSON, with the .proto's field names and every field.
std::string JsonLine(const google::protobuf::Message& message);

// KEY=VALUE pairs as given to a repeated `flag`; INVALID_ARGUMENT naming a malformed one.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseKeyValues(
    const std::vector<std::string>& pairs, absl::string_view flag);

}  // namespace vidclf::client

#endif  // VIDCLF_CLIENT_FOLLOW_OPTIONS_H_
