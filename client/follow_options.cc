#include "client/follow_options.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "media/uri_redaction.h"

namespace vidclf::client {
namespace {

uint32_t NonNegative(int value) { return static_cast<uint32_t>(std::max(0, value)); }

// "frames 0..15 (0.00..0.60 s)  walking 0.912  running 0.050  [seen 16, embedded 16, 12.3 ms]".
void PrintPredictionLine(const vidclf::v1::StreamPrediction& prediction) {
  std::string line = absl::StrFormat("frames %d..%d (%.2f..%.2f s) ", prediction.first_frame(),
                                     prediction.last_frame(), prediction.first_seconds(),
                                     prediction.last_seconds());
  for (const vidclf::v1::LabelScore& label : prediction.top_k()) {
    absl::StrAppendFormat(&line, " %s %.3f", label.label(), label.score());
  }
  absl::StrAppendFormat(&line, "  [seen %d, embedded %d, %.1f ms]", prediction.frames_seen(),
                        prediction.frames_embedded(), prediction.latency_ms());
  if (prediction.dropped_before() > 0) {
    absl::StrAppendFormat(&line, " (%d dropped)", prediction.dropped_before());
  }
  std::cout << line << std::endl;
}

}  // namespace

std::string JsonLine(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseKeyValues(
    const std::vector<std::string>& pairs, absl::string_view flag) {
  std::vector<std::pair<std::string, std::string>> parsed;
  for (const std::string& pair : pairs) {
    const size_t equals = pair.find('=');
    if (equals == std::string::npos || equals == 0) {
      return absl::InvalidArgumentError(absl::StrCat(flag, " takes KEY=VALUE, not '", pair, "'"));
    }
    parsed.emplace_back(pair.substr(0, equals), pair.substr(equals + 1));
  }
  return parsed;
}

void AddFollowOptions(CLI::App* command, FollowOptions* options) {
  AddConnectionOptions(command, &options->connection);
  command->get_option("--timeout-seconds")
      ->description("Deadline of the call; 0: none, the feed runs until it ends or is stopped.");
  command->add_option("--model", options->model, "Model to use (default: the server's default).");
  command->add_option("--attention", options->attention,
                      "Attention to run a transformer model with instead of its own, if its "
                      "bundle allows.");
  command->add_option("--top-k", options->top_k, "Number of ranked labels in each prediction.")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option("--emit-every-frames", options->emit_every_frames,
                   "A prediction every this many embedded frames (default: every one).")
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option("--emit-every-seconds", options->emit_every_seconds,
                   "Or a prediction every this many seconds of video.")
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option("--embed-stride", options->embed_stride,
                   "Embed every this-many-th frame; the others are decoded and skipped.")
      ->check(CLI::NonNegativeNumber);
  command->add_flag("--segment-events", options->segment_events,
                    "Also say when each label's segments start and end: a segment starts where "
                    "the label's score reaches --segment-threshold, goes on while it stays above "
                    "the threshold less --segment-hysteresis, bridges dips up to "
                    "--segment-max-gap-seconds and is told once it has lasted "
                    "--segment-min-seconds.");
  command->add_option("--segment-threshold", options->segment_threshold)
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  command->add_option("--segment-hysteresis", options->segment_hysteresis)
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  command->add_option("--segment-min-seconds", options->segment_min_seconds)
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  command->add_option("--segment-max-gap-seconds", options->segment_max_gap_seconds)
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  command->add_flag("--events-only", options->events_only,
                    "With --segment-events: print the segment events, not the predictions.");
  command->add_flag("--json", options->json, "Print each prediction as one line of JSON.");
}

vidclf::v1::StreamConfig StreamConfigFrom(const FollowOptions& options) {
  vidclf::v1::StreamConfig config;
  config.set_model(options.model);
  config.set_attention(options.attention);
  config.set_top_k(NonNegative(options.top_k));
  config.set_emit_every_frames(NonNegative(options.emit_every_frames));
  config.set_emit_every_seconds(options.emit_every_seconds);
  config.set_embed_stride(NonNegative(options.embed_stride));
  if (options.segment_events || options.events_only) {
    vidclf::v1::SegmentEventOptions* events = config.mutable_segment_events();
    events->set_threshold(options.segment_threshold);
    events->set_hysteresis(options.segment_hysteresis);
    events->set_min_seconds(options.segment_min_seconds);
    events->set_max_gap_seconds(options.segment_max_gap_seconds);
    events->set_events_only(options.events_only);
  }
  return config;
}

void PredictionTally::Count(const vidclf::v1::StreamPrediction& prediction) {
  ++predictions;
  frames_seen = prediction.frames_seen();
  frames_embedded = prediction.frames_embedded();
  dropped += prediction.dropped_before();
}

void PrintPrediction(const vidclf::v1::StreamPrediction& prediction, const FollowOptions& options) {
  if (options.json) {
    std::cout << JsonLine(prediction) << std::endl;
    return;
  }
  if (!options.events_only) PrintPredictionLine(prediction);
  // "segment zoom_in from 3.20 s (score 0.81)", "segment zoom_in 3.20..9.80 s ended (mean 0.74,
  // peak 0.93)".
  for (const vidclf::v1::SegmentEvent& event : prediction.events()) {
    if (event.kind() == vidclf::v1::SegmentEvent::SEGMENT_START) {
      std::cout << absl::StrFormat("segment %s from %.2f s (score %.3f)", event.label(),
                                   event.start_seconds(), event.peak_score())
                << std::endl;
    } else {
      std::cout << absl::StrFormat("segment %s %.2f..%.2f s ended (mean %.3f, peak %.3f)",
                                   event.label(), event.start_seconds(), event.end_seconds(),
                                   event.mean_score(), event.peak_score())
                << std::endl;
    }
  }
}

// "source connected (1): mpegts: h264 320x240" or "source dropped after 250 frames: ...;
// reconnecting in 0.5 s (attempt 1)".
void PrintSourceEvent(const vidclf::v1::SourceEvent& event, bool json) {
  if (json) {
    std::cout << JsonLine(event) << std::endl;
    return;
  }
  if (event.kind() == vidclf::v1::SourceEvent::CONNECTED) {
    std::cout << absl::StrFormat("source connected (%d): %s", event.attempt(), event.message())
              << std::endl;
    return;
  }
  std::cout << absl::StrFormat(
                   "source dropped after %d frames: %s; reconnecting in %.1f s (attempt %d)",
                   event.frames_seen(), event.message(), event.retry_in_seconds(), event.attempt())
            << std::endl;
}

int FailWith(const absl::Status& status) {
  std::cerr << "vidclf: " << absl::StatusCodeToString(status.code()) << ": "
            << media::RedactSecrets(status.message()) << "\n";
  return 1;
}

}  // namespace vidclf::client
