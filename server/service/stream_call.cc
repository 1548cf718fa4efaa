#include "server/service/stream_call.h"

namespace vidclf::service {

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
