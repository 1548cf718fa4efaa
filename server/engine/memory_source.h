// A whole video the call brought in memory, decoded front to back as if it were arriving: any
// container libavformat reads, an MP4 whose index comes last included.
#ifndef VIDCLF_SERVER_ENGINE_MEMORY_SOURCE_H_
#define VIDCLF_SERVER_ENGINE_MEMORY_SOURCE_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "media/live_decoder.h"
#include "server/engine/frame_source.h"

namespace vidclf::engine {

class MemorySource : public FrameSource {
 public:
  // `bytes` must outlive the source.
  MemorySource(absl::string_view bytes, const media::LiveDecodeOptions& decode)
      : bytes_(bytes), decode_(decode) {}

  absl::Status Run(const FrameHandler& on_frame) override;

 private:
  const absl::string_view bytes_;
  const media::LiveDecodeOptions decode_;
};

}  // namespace vidclf::engine

#endif  // VIDCLF_SERVER_ENGINE_MEMORY_SOURCE_H_
