#include "server/service/stream_call.h"

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
    vidclf::v1::SegmentEvent* out = message.add_events();
    out->set_kind(event.kind == pipeline::SegmentEvent::Kind::kStart
                      ? vidclf::v1::SegmentEvent::SEGMENT_START
                      : vidclf::v1::SegmentEvent::SEGMENT_END);
    out->set_label(label);
    out->set_start_seconds(event.segment.start_seconds);
    out->set_end_seconds(event.segment.end_seconds);
    out->set_mean_score(event.segment.mean_score);
    out->set_peak_score(event.segment.peak_score);
  }
  return message;
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

void Wrap(vidclf::v1::StreamPrediction prediction, vidclf::v1::StreamPrediction* response) {
  *response = std::move(prediction);
}

void Wrap(vidclf::v1::StreamPrediction prediction, vidclf::v1::WatchSourceResponse* response) {
  *response->mutable_prediction() = std::move(prediction);
}

void Wrap(vidclf::v1::SourceEvent event, vidclf::v1::WatchSourceResponse* response) {
  *response->mutable_source() = std::move(event);
}

void Wrap(vidclf::v1::StreamPrediction prediction, vidclf::v1::ClassifySegmentsResponse* response) {
  response->set_model(prediction.model());
  response->set_model_version(prediction.model_version());
  if (prediction.top_k_size() > 0) {
    vidclf::v1::SegmentWindow* window = response->add_windows();
    window->mutable_top_k()->Swap(prediction.mutable_top_k());
    window->set_first_frame(prediction.first_frame());
    window->set_last_frame(prediction.last_frame());
    window->set_first_seconds(prediction.first_seconds());
    window->set_last_seconds(prediction.last_seconds());
  }
  response->mutable_events()->Swap(prediction.mutable_events());
  response->set_frames_seen(prediction.frames_seen());
  response->set_frames_embedded(prediction.frames_embedded());
}

bool Coalesce(vidclf::v1::StreamPrediction* older, vidclf::v1::StreamPrediction* newer) {
  // The older prediction's segment events go with the newer: events are never dropped.
  if (older->events_size() > 0) {
    older->mutable_events()->MergeFrom(newer->events());
    newer->mutable_events()->Swap(older->mutable_events());
  }
  return true;
}

bool Coalesce(vidclf::v1::WatchSourceResponse* older, vidclf::v1::WatchSourceResponse* newer) {
  return Coalesce(older->mutable_prediction(), newer->mutable_prediction());
}

bool Coalesce(vidclf::v1::ClassifySegmentsResponse* older,
              vidclf::v1::ClassifySegmentsResponse* newer) {
  older->mutable_windows()->MergeFrom(newer->windows());
  newer->mutable_windows()->Swap(older->mutable_windows());
  older->mutable_events()->MergeFrom(newer->events());
  newer->mutable_events()->Swap(older->mutable_events());
  return false;
}

}  // namespace vidclf::service
