#include "server/sources/update_queue.h"

#include <utility>

namespace vidclf::sources {

UpdateQueue::Offered UpdateQueue::Offer(const vidclf::v1::SourceUpdate& update, bool droppable) {
  if (!droppable) {
    if (updates_.size() >= kMaxWaitingSourceUpdates) return Offered::kTooFarBehind;
    updates_.push_back(update);
    return Offered::kKept;
  }
  auto [waiting, inserted] = predictions_.try_emplace(update.name(), update);
  if (inserted) {
    prediction_order_.push_back(update.name());
    return Offered::kKept;
  }
  waiting->second = update;
  ++dropped_;
  return Offered::kReplacedAPrediction;
}

bool UpdateQueue::Next(vidclf::v1::SourceUpdate* update) {
  if (!updates_.empty()) {
    *update = std::move(updates_.front());
    updates_.pop_front();
  } else if (!prediction_order_.empty()) {
    const auto waiting = predictions_.find(prediction_order_.front());
    prediction_order_.pop_front();
    *update = std::move(waiting->second);
    predictions_.erase(waiting);
  } else {
    return false;
  }
  update->set_dropped_before(dropped_);
  dropped_ = 0;
  return true;
}

}  // namespace vidclf::sources
