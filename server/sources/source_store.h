// Where the source registry keeps its registrations, so that every camera comes back after a
// restart with no client involved. One interface, so that a fleet's store (etcd) can stand beside
// the local one; nothing else in the server knows which is in use.
#ifndef VIDCLF_SERVER_SOURCES_SOURCE_STORE_H_
#define VIDCLF_SERVER_SOURCES_SOURCE_STORE_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "vidclf/v1/sources.pb.h"

namespace vidclf::sources {

class SourceStore {
 public:
  virtual ~SourceStore() = default;
  // The registrations saved last (their desired fields; no status), none the first time.
  virtual absl::StatusOr<std::vector<vidclf::v1::Source>> Load() = 0;
  // Replaces what is saved with `sources`, all or nothing.
  virtual absl::Status Save(const std::vector<vidclf::v1::Source>& sources) = 0;

  // Each source's latest checkpoint (source_checkpoint.h), opaque bytes: saved whole or not at
  // all, nullopt when there is none, forgotten with the source.
  virtual absl::Status SaveCheckpoint(const std::string& id, const std::string& bytes) = 0;
  virtual absl::StatusOr<std::optional<std::string>> LoadCheckpoint(const std::string& id) = 0;
  virtual absl::Status DeleteCheckpoint(const std::string& id) = 0;
};

// DIR/sources.json, {"version": 1, "sources": [Source as the API's JSON, ...]}, and
// DIR/checkpoints/ID, each written to a temporary file, flushed to disk and renamed over the old
// one, so that a crash leaves either the old file or the new one. Readable by the server's user
// only (0600): the URIs keep their credentials, to reconnect.
class StateDirectoryStore final : public SourceStore {
 public:
  static constexpr int kVersion = 1;

  // Creates DIR (0700) when missing. A file that is there but cannot be read, parsed or is of
  // another version is an error naming it and what is wrong, and is left untouched: nothing is
  // lost by a server that refuses to start.
  static absl::StatusOr<std::unique_ptr<StateDirectoryStore>> Open(const std::string& directory);

  absl::StatusOr<std::vector<vidclf::v1::Source>> Load() override;
  absl::Status Save(const std::vector<vidclf::v1::Source>& sources) override;
  absl::Status SaveCheckpoint(const std::string& id, const std::string& bytes) override;
  absl::StatusOr<std::optional<std::string>> LoadCheckpoint(const std::string& id) override;
  absl::Status DeleteCheckpoint(const std::string& id) override;

  const std::string& path() const { return path_; }

 private:
  StateDirectoryStore(std::string directory, std::string path)
      : directory_(std::move(directory)), path_(std::move(path)) {}
  // DIR/checkpoints/ID.
  std::string CheckpointPath(const std::string& id) const;
  // Writes `bytes` to `path` through a temporary file renamed over it.
  absl::Status ReplaceFile(const std::string& path, const std::string& bytes) const;

  const std::string directory_;
  const std::string path_;
};

}  // namespace vidclf::sources

#endif  // VIDCLF_SERVER_SOURCES_SOURCE_STORE_H_
