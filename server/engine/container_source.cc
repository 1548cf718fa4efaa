#include "server/engine/container_source.h"

namespace vidclf::engine {

absl::Status ContainerSource::Run(const FrameHandler& on_frame) {
  return media::DecodeLive(bytes_, decode_, [&](const media::LiveFrame& frame) {
    return on_frame(SourceFrame{frame.index, frame.timestamp_seconds, frame.arrived, frame.pixels});
  });
}

}  // namespace vidclf::engine
