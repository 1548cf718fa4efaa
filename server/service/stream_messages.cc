#include "server/service/stream_messages.h"

#include <algorithm>

namespace vidclf::service {

int CappedToInt(uint32_t value) { return static_cast<int>(std::min<uint32_t>(value, 1 << 30)); }

engine::StreamOptions HeadOptionsFromConfig(const vidclf::v1::StreamConfig& config) {
  engine::StreamOptions options;
  options.model = config.model();
  options.attention = config.attention();
  options.top_k = CappedToInt(config.top_k());
  options.emit_every_frames = std::max(1, CappedToInt(config.emit_every_frames()));
  options.emit_every_seconds = config.emit_every_seconds();
  options.embed_stride = std::max(1, CappedToInt(config.embed_stride()));
  options.default_sampling = config.embed_stride() == 0;
  if (config.has_segment_events()) {
    options.segments = SegmentOptionsFrom(config.segment_events());
    options.events_only = config.segment_events().events_only();
  }
  return options;
}

pipeline::SegmentOptions SegmentOptionsFrom(const vidclf::v1::SegmentEventOptions& message) {
  pipeline::SegmentOptions segments;
  if (message.has_threshold()) segments.enter_score = message.threshold();
  if (message.has_hysteresis()) segments.hysteresis = message.hysteresis();
  if (message.has_min_seconds()) segments.min_seconds = message.min_seconds();
  if (message.has_max_gap_seconds()) segments.max_gap_seconds = message.max_gap_seconds();
  return segments;
}

absl::StatusOr<engine::StreamOptions> StreamOptionsFromConfig(
    const vidclf::v1::StreamConfig& config) {
  engine::StreamOptions options = HeadOptionsFromConfig(config);
  switch (config.input()) {
    case vidclf::v1::StreamConfig::CONTAINER:
      options.input = engine::StreamOptions::Input::kContainer;
      break;
    case vidclf::v1::StreamConfig::ENCODED_IMAGES:
      options.input = engine::StreamOptions::Input::kEncodedImages;
      break;
    case vidclf::v1::StreamConfig::RAW_RGB24:
      options.input = engine::StreamOptions::Input::kRawRgb24;
      options.width = CappedToInt(config.width());
      options.height = CappedToInt(config.height());
      break;
    default:
      return absl::InvalidArgumentError(
          "StreamConfig.input must say what the feed holds: CONTAINER, ENCODED_IMAGES or "
          "RAW_RGB24");
  }
  return options;
}

vidclf::v1::StreamPrediction ToMessage(const engine::StreamPrediction& prediction) {
  vidclf::v1::StreamPrediction message;
  message.set_model(prediction.model);
  message.set_model_version(prediction.model_version);
  for (const auto& [label, score] : prediction.top_k) {
    vidclf::v1::LabelScore* entry = message.add_top_k();
    entry->set_label(label);
    entry->set_score(score);
  }
  message.set_first_frame(prediction.first_frame);
  message.set_last_frame(prediction.last_frame);
  message.set_first_seconds(prediction.first_seconds);
  message.set_last_seconds(prediction.last_seconds);
  message.set_frames_seen(prediction.frames_seen);
  message.set_frames_embedded(prediction.frames_embedded);
  for (const auto& [event, label] : prediction.events) {
    *message.add_events() = ToMessage(event, label);
  }
  return message;
}

vidclf::v1::SegmentEvent ToMessage(const pipeline::SegmentEvent& event, const std::string& label) {
  vidclf::v1::SegmentEvent out;
  out.set_kind(event.kind == pipeline::SegmentEvent::Kind::kStart
                   ? vidclf::v1::SegmentEvent::SEGMENT_START
                   : vidclf::v1::SegmentEvent::SEGMENT_END);
  out.set_label(label);
  out.set_start_seconds(event.segment.start_seconds);
  out.set_end_seconds(event.segment.end_seconds);
  out.set_mean_score(event.segment.mean_score);
  out.set_peak_score(event.segment.peak_score);
  return out;
}

vidclf::v1::SourceEvent ToMessage(const engine::SourceEvent& event) {
  vidclf::v1::SourceEvent message;
  message.set_kind(event.kind == engine::SourceEvent::Kind::kConnected
                       ? vidclf::v1::SourceEvent::CONNECTED
                       : vidclf::v1::SourceEvent::DROPPED);
  message.set_attempt(event.attempt);
  message.set_message(event.message);
  message.set_retry_in_seconds(event.retry_in_seconds);
  message.set_frames_seen(event.frames_seen);
  return message;
}

}  // namespace vidclf::service
