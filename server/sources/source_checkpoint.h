// A registered source's checkpoint as bytes for its SourceStore: where its stream's head had
// got to (engine::StreamCheckpoint) and when, so that it can go on after a restart.
#ifndef VIDCLF_SERVER_SOURCES_SOURCE_CHECKPOINT_H_
#define VIDCLF_SERVER_SOURCES_SOURCE_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/engine/stream_session.h"

namespace vidclf::sources {

// The source's own counts (SourceStatus), carried on across a restart whatever the model.
struct SourceCounters {
  int64_t frames = 0;
  int64_t reconnects = 0;
};

struct SavedCheckpoint {
  engine::StreamCheckpoint checkpoint;
  // The label of each of checkpoint.open_segments, by name ("" in older checkpoints): a source
  // that starts cold under another model still ends them by name.
  std::vector<std::string> open_segment_labels;
  SourceCounters counters;
  absl::Time taken;
};

// A JSON line (version, fingerprint, counts, open segments with their labels' names from
// `labels`, time) and then model::EncodeHeadState's bytes.
std::string EncodeCheckpoint(const engine::StreamCheckpoint& checkpoint,
                             const SourceCounters& counters, const std::vector<std::string>& labels,
                             absl::Time taken);
// What EncodeCheckpoint wrote, the head state's tensors on `device`; INVALID_ARGUMENT for
// bytes of another version or that are not a checkpoint.
absl::StatusOr<SavedCheckpoint> DecodeCheckpoint(absl::string_view bytes,
                                                 const torch::Device& device);

}  // namespace vidclf::sources

#endif  // VIDCLF_SERVER_SOURCES_SOURCE_CHECKPOINT_H_
