// The rules a Source's fields follow (AIP-122 ids, labels, bounds), checked before anything is
// registered: every refusal is INVALID_ARGUMENT naming the field.
#ifndef VIDCLF_SERVER_SOURCES_SOURCE_FIELDS_H_
#define VIDCLF_SERVER_SOURCES_SOURCE_FIELDS_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "vidclf/v1/sources.pb.h"

namespace vidclf::sources {

inline constexpr char kNamePrefix[] = "sources/";
inline constexpr int kMaxIdLength = 63;
inline constexpr int kMaxLabels = 16;
inline constexpr double kMaxStallTimeoutSeconds = 3600;
inline constexpr double kMaxCheckpointIntervalSeconds = 3600;
inline constexpr double kMaxResumeGapSeconds = 30 * 86400;
inline constexpr absl::Duration kDefaultStallTimeout = absl::Seconds(5);

// OK for 1 to 63 characters of [a-z0-9-] starting with a letter and not ending with '-'.
absl::Status ValidateSourceId(absl::string_view id);
// The id in "sources/{id}"; INVALID_ARGUMENT naming `field` otherwise.
absl::StatusOr<std::string> IdFromName(absl::string_view name, absl::string_view field = "name");

// The fields a client sets: uri (present; the allowlist is the engine's to check), labels,
// stall_timeout_seconds, input_options, checkpoint_interval_seconds, max_resume_gap_seconds. The
// config's own ranges are the engine's to check.
absl::Status ValidateSourceFields(const vidclf::v1::Source& source);

// How long the source may send nothing while connected before it is STALLED.
absl::Duration StallTimeoutOf(const vidclf::v1::Source& source);

// A ListSources filter: "state=LIVE", "labels.KEY=VALUE", joined by " AND ".
struct SourceFilter {
  std::optional<vidclf::v1::SourceStatus::State> state;
  std::vector<std::pair<std::string, std::string>> labels;
  bool Matches(const vidclf::v1::Source& source) const;
};
absl::StatusOr<SourceFilter> ParseFilter(absl::string_view filter);

}  // namespace vidclf::sources

#endif  // VIDCLF_SERVER_SOURCES_SOURCE_FIELDS_H_
