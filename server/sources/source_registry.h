// The server's sources: cameras and streams it pulls on its own, registered once and followed
// until deleted, whoever is connected (the Sources API). It owns each registration's life
// (registered_source.h), keeps the registrations in a SourceStore so that they come back after a
// restart, and hands every source's updates to its subscribers (update_fanout.h). Calls only
// look at it. Thread-safe.
#ifndef VIDCLF_SERVER_SOURCES_SOURCE_REGISTRY_H_
#define VIDCLF_SERVER_SOURCES_SOURCE_REGISTRY_H_

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/engine/classify_engine.h"
#include "server/sources/page_tokens.h"
#include "server/sources/registered_source.h"
#include "server/sources/source_store.h"
#include "server/sources/update_fanout.h"
#include "vidclf/v1/sources.pb.h"

namespace vidclf::sources {

struct RegistryOptions {
  // Sources registered at most; past it CreateSource is RESOURCE_EXHAUSTED.
  int max_sources = 1000;
  // How long letting go of a source (delete, update, drain) waits for its session to close,
  // its RTSP TEARDOWN sent.
  absl::Duration stop_timeout = absl::Seconds(5);
};

class SourceRegistry {
 public:
  // Loads the registrations `store` holds (none when it is null: nothing is kept) and starts
  // following each. `engine` must outlive the registry.
  static absl::StatusOr<std::unique_ptr<SourceRegistry>> Create(engine::ClassifyEngine* engine,
                                                                std::unique_ptr<SourceStore> store,
                                                                RegistryOptions options);
  // Stop()s.
  ~SourceRegistry();

  // The Sources API's methods (vidclf/v1/sources.proto says what each refuses).
  absl::StatusOr<vidclf::v1::Source> CreateSource(const vidclf::v1::CreateSourceRequest& request);
  absl::StatusOr<vidclf::v1::Source> GetSource(const std::string& name) const;
  absl::StatusOr<vidclf::v1::ListSourcesResponse> ListSources(
      const vidclf::v1::ListSourcesRequest& request) const;
  absl::StatusOr<vidclf::v1::Source> UpdateSource(const vidclf::v1::UpdateSourceRequest& request);
  absl::Status DeleteSource(const std::string& name);

  // Every source with its status now, by id.
  std::vector<vidclf::v1::Source> Snapshot() const;

  // Subscribe's subscribers.
  UpdateFanout& fanout() { return fanout_; }
  // NOT_FOUND naming the first of `names` that is not registered.
  absl::Status CheckRegistered(const std::vector<std::string>& names) const;

  // Lets go of every source (TEARDOWN to each camera) and keeps their registrations, for the
  // next start: the server's drain. Changes are refused from then on (UNAVAILABLE).
  void Stop();

 private:
  SourceRegistry(engine::ClassifyEngine* engine, std::unique_ptr<SourceStore> store,
                 RegistryOptions options);
  // OK when `source` can be followed by this server: fields, allowlist, model and attention.
  absl::Status Check(const vidclf::v1::Source& source) const;
  // Whether a head's state could go on from one registration to the other: the same model
  // and attention.
  bool SameHead(const vidclf::v1::Source& a, const vidclf::v1::Source& b) const;
  // Saves every registration; on failure the caller undoes its change.
  absl::Status Persist() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Every 250 ms: stalls noticed, refused sessions opened again, new checkpoints saved.
  void TickLoop();
  // Saves the checkpoints the sources have taken since they were last saved. `change_mutex_`
  // held.
  void SaveCheckpoints();

  engine::ClassifyEngine* const engine_;
  const std::unique_ptr<SourceStore> store_;
  const RegistryOptions options_;
  UpdateFanout fanout_;
  const PageTokens page_tokens_;

  mutable absl::Mutex mutex_;
  // By source id. A source being replaced or deleted leaves it before it is let go of.
  std::map<std::string, std::shared_ptr<RegisteredSource>> sources_ ABSL_GUARDED_BY(mutex_);
  bool stopped_ ABSL_GUARDED_BY(mutex_) = false;
  // Serializes changes, so that a slow stop of one source's session keeps the order of changes
  // without holding mutex_ (which Get, List and the clock take).
  absl::Mutex change_mutex_ ABSL_ACQUIRED_BEFORE(mutex_);
  std::thread ticker_;
};

}  // namespace vidclf::sources

#endif  // VIDCLF_SERVER_SOURCES_SOURCE_REGISTRY_H_
