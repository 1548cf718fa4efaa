#include "media/frame_buffer.h"

#include <utility>

#include "media/av_util.h"

extern "C" {
#include <libavutil/hwcontext.h>
}

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

std::optional<FrameBuffer> FrameBuffer::GpuPicture(const AVFrame& frame, int device_index,
                                                   int clockwise_quarter_turns) {
  if (frame.format != AV_PIX_FMT_CUDA || frame.hw_frames_ctx == nullptr) return std::nullopt;
  const auto& frames = *reinterpret_cast<const AVHWFramesContext*>(frame.hw_frames_ctx->data);
  FrameBuffer picture;
  int64_t sample_bytes = 1;
  if (frames.sw_format == AV_PIX_FMT_NV12) {
    picture.format = PixelFormat::kNv12;
  } else if (frames.sw_format == AV_PIX_FMT_P010LE) {
    picture.format = PixelFormat::kP010;
    sample_bytes = 2;
  } else {
    return std::nullopt;
  }
  std::shared_ptr<AVFrame> reference(av_frame_clone(&frame), FrameDeleter());
  if (reference == nullptr) return std::nullopt;
  picture.memory = MemoryKind::kDevice;
  picture.device_index = device_index;
  const int64_t height = frame.height;
  const int64_t width = frame.width;
  picture.planes[0] = {
      reference->data[0], {height, width, 1}, {reference->linesize[0] / sample_bytes, 1, 1}};
  picture.planes[1] = {reference->data[1],
                       {(height + 1) / 2, (width + 1) / 2, 2},
                       {reference->linesize[1] / sample_bytes, 2, 1}};
  picture.colourspace = frame.colorspace;
  picture.full_range = frame.color_range == AVCOL_RANGE_JPEG;
  picture.sample_aspect_ratio = frame.sample_aspect_ratio;
  picture.clockwise_quarter_turns = clockwise_quarter_turns;
  picture.owner = std::move(reference);
  return picture;
}

const float* FrameBuffer::host_rgb_floats() const {
  if (memory == MemoryKind::kDevice || format != PixelFormat::kRgbFloat) return nullptr;
  return static_cast<const float*>(planes[0].data);
}

}  // namespace vidclf::media
