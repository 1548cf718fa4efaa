// Where a live stream's frames come from, behind one interface: a container arriving in the call
// (ContainerSource), a URI the server pulls and follows again when it drops (UriSource), or
// pictures sent one by one (PictureSource). A stream session runs one on its feeder thread.
#ifndef VIDCLF_SERVER_ENGINE_FRAME_SOURCE_H_
#define VIDCLF_SERVER_ENGINE_FRAME_SOURCE_H_

#include <chrono>
#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "media/frame_buffer.h"

namespace vidclf::engine {

// Frames that carry no timestamp are spaced as a 25 fps camera's.
inline constexpr double kDefaultPictureRate = 25;

// One frame of the feed, valid during the call that hands it on.
struct SourceFrame {
  // Position among all the frames of the feed, from 0, and presentation time in seconds.
  int64_t index = 0;
  double seconds = 0;
  // When the bytes that brought it arrived.
  std::chrono::steady_clock::time_point arrived;
  // The converted frame, in the model's layout; null for a frame off the embed stride, which is
  // not converted.
  const media::FrameBuffer* pixels = nullptr;
};

// Takes one frame; an error stops the source with it.
using FrameHandler = std::function<absl::Status(const SourceFrame&)>;

class FrameSource {
 public:
  virtual ~FrameSource() = default;
  // Hands every frame of the feed to `on_frame`, in order, on the calling thread, until the feed
  // ends (OK) or fails.
  virtual absl::Status Run(const FrameHandler& on_frame) = 0;
};

}  // namespace vidclf::engine

#endif  // VIDCLF_SERVER_ENGINE_FRAME_SOURCE_H_
