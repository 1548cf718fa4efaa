// A container (MPEG-TS, Matroska, fragmented MP4, ...) arriving in the call, decoded as it comes.
#ifndef VIDCLF_SERVER_ENGINE_CONTAINER_SOURCE_H_
#define VIDCLF_SERVER_ENGINE_CONTAINER_SOURCE_H_

#include "media/byte_stream.h"
#include "media/live_decoder.h"
#include "server/engine/frame_source.h"

namespace vidclf::engine {

class ContainerSource : public FrameSource {
 public:
  // `bytes` must outlive the source; the producer appends to it and closes it.
  ContainerSource(media::ByteStream& bytes, const media::LiveDecodeOptions& decode)
      : bytes_(bytes), decode_(decode) {}

  absl::Status Run(const FrameHandler& on_frame) override;

 private:
  media::ByteStream& bytes_;
  const media::LiveDecodeOptions decode_;
};

}  // namespace vidclf::engine

#endif  // VIDCLF_SERVER_ENGINE_CONTAINER_SOURCE_H_
