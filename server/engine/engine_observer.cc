#include "server/engine/engine_observer.h"

namespace vidclf::engine {

absl::string_view StageName(Stage stage) {
  switch (stage) {
    case Stage::kQueue:
      return "queue";
    case Stage::kDecode:
      return "decode";
    case Stage::kPreprocess:
      return "preprocess";
    case Stage::kEmbed:
      return "embed";
    case Stage::kHead:
      return "head";
  }
  return "unknown";
}

absl::string_view RefusalName(Refusal refusal) {
  switch (refusal) {
    case Refusal::kRequests:
      return "requests";
    case Refusal::kBytes:
      return "bytes";
    case Refusal::kDeadline:
      return "deadline";
    case Refusal::kDraining:
      return "draining";
    case Refusal::kStreams:
      return "streams";
  }
  return "unknown";
}

}  // namespace vidclf::engine
