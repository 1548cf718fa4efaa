// vidclf segments: what happened when in a video (a file sent whole or in chunks, or a URI the
// server pulls), printed as the server finds it: a table of segments, JSON lines, and a WebVTT
// track that video players show over the video.
#ifndef VIDCLF_CLIENT_SEGMENTS_COMMAND_H_
#define VIDCLF_CLIENT_SEGMENTS_COMMAND_H_

#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "client/connection.h"
#include "vidclf/v1/video_classifier.grpc.pb.h"

namespace vidclf::client {

struct SegmentsOptions {
  // No deadline unless timeout_seconds > 0: a long recording takes as long as it takes.
  ConnectionOptions connection = WithoutDeadline();
  std::string model;
  std::string attention;
  int top_k = 3;
  // Sampling: frames per second of video, or every n-th frame; unset: the server's (4 per s).
  std::optional<double> fps;
  std::optional<int> every_nth_frame;
  // Sampled frames per window and between windows' starts; unset: the server's.
  std::optional<int> window_frames;
  std::optional<int> hop_frames;
  float threshold = 0.5f;
  float hysteresis = 0.1f;
  double min_seconds = 1;
  double max_gap_seconds = 0.5;
  // Send the file in chunks (ClassifySegmentsUpload) rather than whole; "-" always is.
  bool upload = false;
  int chunk_kib = 256;
  // Print each window's labels too.
  bool windows = false;
  // One JSON object per segment (and window) and line, instead of a table.
  bool json = false;
  // Also write the segments here as a WebVTT track, and the timeline here as a PNG.
  std::string webvtt;
  std::string plot;
};

void AddSegmentsOptions(CLI::App* command, SegmentsOptions* options);

// The request `options` ask for, without its source.
vidclf::v1::ClassifySegmentsRequest SegmentsSettingsFrom(const SegmentsOptions& options);

// A segment (a SEGMENT_END event) as the JSON object --json prints: label, start_seconds,
// end_seconds, mean_score, peak_score.
nlohmann::json SegmentJson(const vidclf::v1::SegmentEvent& segment);

// One ClassifySegments call of `request` (a video whole, or a URI): each message to `on_response`
// as it comes; returns the call's status.
grpc::Status ReadSegments(
    vidclf::v1::VideoClassifier::Stub& stub, grpc::ClientContext& context,
    const vidclf::v1::ClassifySegmentsRequest& request,
    const std::function<void(const vidclf::v1::ClassifySegmentsResponse&)>& on_response);

// The segments (SEGMENT_END events) as a WebVTT file: a cue per segment, by start time.
std::string WebVttOf(std::vector<vidclf::v1::SegmentEvent> segments);

int RunSegments(const std::string& source, const SegmentsOptions& options);

}  // namespace vidclf::client

#endif  // VIDCLF_CLIENT_SEGMENTS_COMMAND_H_
