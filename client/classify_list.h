// vidclf classify --from-list LIST [--shard I/N] [--output FILE]: classifies the videos a list
// names, one call each, and writes one JSON line per video, for batch jobs. A Kubernetes Indexed
// Job runs one shard per pod: --shard $(JOB_COMPLETION_INDEX)/N.
//
// With --output the run resumes: videos that FILE already answers (classified, or refused for
// what they are) are not sent again, lines of calls that failed otherwise are dropped so that they
// are tried again, and a line cut short by a killed run is dropped too. Each line is flushed as
// it is written.
#ifndef VIDCLF_CLIENT_CLASSIFY_LIST_H_
#define VIDCLF_CLIENT_CLASSIFY_LIST_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/classify_command.h"

namespace vidclf::client {

// Shard `index` of `count` takes the list's entries whose position modulo `count` is `index`.
struct Shard {
  int index = 0;
  int count = 1;
};

// "I/N", with 0 <= I < N.
absl::StatusOr<Shard> ParseShard(absl::string_view text);

// Exit codes: 0 when every video of the shard was classified; 3 when the rest were but some were
// refused for what they are (INVALID_ARGUMENT, NOT_FOUND, PERMISSION_DENIED, or a file that
// cannot be read), which a retry would not change; 1 when a call failed otherwise (the server
// was unavailable, overloaded or too slow), which a retry may mend; 2 for a list or options that
// cannot be used.
// With `segments`, each video's segments (ClassifySegments with the server's defaults: 4
// frames/s, windows of the model's num_frames every half window, score threshold 0.5) instead of
// its labels; --timeout-seconds bounds each call (0: no bound, for long recordings).
int RunClassifyList(const std::string& list_path, const std::string& shard,
                    const std::string& output_path, const ClassifyOptions& options,
                    bool segments = false);

}  // namespace vidclf::client

#endif  // VIDCLF_CLIENT_CLASSIFY_LIST_H_
