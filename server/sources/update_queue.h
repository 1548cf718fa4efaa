// What waits for one subscriber (Subscribe over gRPC or over HTTP), behind what it is being sent:
// in order, the segment events and state changes, which are never dropped, and the newest
// prediction of each source: an older one waiting is replaced and counted in the next update's
// dropped_before. Past kMaxWaitingSourceUpdates events and state changes the subscriber has
// fallen too far behind, and is ended, so that memory stays bounded. Not thread-safe: its owner
// locks.
#ifndef VIDCLF_SERVER_SOURCES_UPDATE_QUEUE_H_
#define VIDCLF_SERVER_SOURCES_UPDATE_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>

#include "vidclf/v1/sources.pb.h"

namespace vidclf::sources {

inline constexpr size_t kMaxWaitingSourceUpdates = 4096;

class UpdateQueue {
 public:
  enum class Offered { kKept, kReplacedAPrediction, kTooFarBehind };
  // Takes an update as UpdateSubscriber::Offer does; kTooFarBehind keeps nothing.
  Offered Offer(const vidclf::v1::SourceUpdate& update, bool droppable);
  // The next update to send, with dropped_before set; false when none waits.
  bool Next(vidclf::v1::SourceUpdate* update);

 private:
  std::deque<vidclf::v1::SourceUpdate> updates_;
  std::map<std::string, vidclf::v1::SourceUpdate> predictions_;
  std::deque<std::string> prediction_order_;
  uint32_t dropped_ = 0;
};

}  // namespace vidclf::sources

#endif  // VIDCLF_SERVER_SOURCES_UPDATE_QUEUE_H_
