#include "server/sources/update_fanout.h"

#include <utility>

namespace vidclf::sources {

void UpdateFanout::Add(UpdateSubscriber* subscriber, std::set<std::string> names) {
  absl::MutexLock lock(&mutex_);
  subscribers_[subscriber] = std::move(names);
}

void UpdateFanout::Remove(UpdateSubscriber* subscriber) {
  absl::MutexLock lock(&mutex_);
  subscribers_.erase(subscriber);
}

void UpdateFanout::Publish(const vidclf::v1::SourceUpdate& update, bool droppable) {
  absl::MutexLock lock(&mutex_);
  for (const auto& [subscriber, names] : subscribers_) {
    if (names.empty() || names.count(update.name()) > 0) subscriber->Offer(update, droppable);
  }
}

int UpdateFanout::subscribers() const {
  absl::MutexLock lock(&mutex_);
  return static_cast<int>(subscribers_.size());
}

}  // namespace vidclf::sources
