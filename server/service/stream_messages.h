// Live-stream messages of vidclf.v1 to and from the engine's types: what a StreamConfig asks
// for, and how predictions and source events are written. Used by the stream RPCs and by the
// source registry, whose sources are configured and heard in the same messages.
#ifndef VIDCLF_SERVER_SERVICE_STREAM_MESSAGES_H_
#define VIDCLF_SERVER_SERVICE_STREAM_MESSAGES_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "server/engine/stream_session.h"
#include "vidclf/v1/video_classifier.pb.h"

namespace vidclf::service {

// A message's count as an int, capped at 2^30.
int CappedToInt(uint32_t value);
// The segment tracker's options a message asks for; its unset fields keep the defaults.
pipeline::SegmentOptions SegmentOptionsFrom(const vidclf::v1::SegmentEventOptions& message);
// The model, attention, top_k, emit policy, embed stride and segment events a config asks for; 0
// for the emit period in frames or the stride means 1.
engine::StreamOptions HeadOptionsFromConfig(const vidclf::v1::StreamConfig& config);
// All a config asks for: its head options and its input kind (INVALID_ARGUMENT when unset).
absl::StatusOr<engine::StreamOptions> StreamOptionsFromConfig(
    const vidclf::v1::StreamConfig& config);

vidclf::v1::StreamPrediction ToMessage(const engine::StreamPrediction& prediction);
vidclf::v1::SourceEvent ToMessage(const engine::SourceEvent& event);
vidclf::v1::SegmentEvent ToMessage(const pipeline::SegmentEvent& event, const std::string& label);

}  // namespace vidclf::service

#endif  // VIDCLF_SERVER_SERVICE_STREAM_MESSAGES_H_
