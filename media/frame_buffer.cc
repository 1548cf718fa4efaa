#include "media/frame_buffer.h"

namespace vidclf::media {

FrameBuffer FrameBuffer::HostRgbFloat(const float* pixels, int64_t height, int64_t width,
                                      bool channels_last) {
  FrameBuffer frame;
  FramePlane& plane = frame.planes[0];
  plane.data = pixels;
  if (channels_last) {
    plane.shape = {height, width, 3};
    plane.strides = {width * 3, 3, 1};
  } else {
    plane.shape = {3, height, width};
    plane.strides = {height * width, width, 1};
  }
  return frame;
}

const float* FrameBuffer::host_rgb_floats() const {
  if (memory == MemoryKind::kDevice || format != PixelFormat::kRgbFloat) return nullptr;
  return static_cast<const float*>(planes[0].data);
}

}  // namespace vidclf::media
