#include "server/engine/memory_source.h"

namespace vidclf::engine {

absl::Status MemorySource::Run(const FrameHandler& on_frame) {
  return media::DecodeLiveMemory(bytes_, decode_, [&](const media::LiveFrame& frame) {
    return on_frame(SourceFrame{frame.index, frame.timestamp_seconds, frame.arrived, frame.pixels});
  });
}

}  // namespace vidclf::engine
