// Hands each source's updates (predictions, segment events, state changes) to every subscriber
// that asked for that source. Subscribers queue them their own way; a slow one never slows a
// camera, because taking an update must not block.
#ifndef VIDCLF_SERVER_SOURCES_UPDATE_FANOUT_H_
#define VIDCLF_SERVER_SOURCES_UPDATE_FANOUT_H_

#include <map>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "vidclf/v1/sources.pb.h"

namespace vidclf::sources {

class UpdateSubscriber {
 public:
  virtual ~UpdateSubscriber() = default;
  // Takes one update without blocking; `droppable` for a prediction, which a subscriber that is
  // behind may drop (and count), unlike events and state changes. Called with the fan-out's lock
  // held: must not call back into the fan-out.
  virtual void Offer(const vidclf::v1::SourceUpdate& update, bool droppable) = 0;
};

class UpdateFanout {
 public:
  // `names` ("sources/{id}") empty: every source, those registered later too. `subscriber` must
  // stay alive until Remove returns.
  void Add(UpdateSubscriber* subscriber, std::set<std::string> names);
  // Once it returns, `subscriber` is offered nothing more.
  void Remove(UpdateSubscriber* subscriber);
  void Publish(const vidclf::v1::SourceUpdate& update, bool droppable);
  int subscribers() const;

 private:
  mutable absl::Mutex mutex_;
  std::map<UpdateSubscriber*, std::set<std::string>> subscribers_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace vidclf::sources

#endif  // VIDCLF_SERVER_SOURCES_UPDATE_FANOUT_H_
