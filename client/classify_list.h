// vidclf classify --from-list LIST [--shard I/N]: classifies the videos a list names, one call
// each, and prints one JSON line per video, for batch jobs. A Kubernetes Indexed Job runs one
// shard per pod: --shard $(JOB_COMPLETION_INDEX)/N.
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
int RunClassifyList(const std::string& list_path, const std::string& shard,
                    const ClassifyOptions& options);

}  // namespace vidclf::client

#endif  // VIDCLF_CLIENT_CLASSIFY_LIST_H_
