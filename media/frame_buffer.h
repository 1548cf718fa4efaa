// One frame as it travels from a decoder to the backbone: which memory holds it (the host's, pinned
// host memory, or a GPU's), how its pixels are laid out, and what keeps that memory alive. The
// decoders here hand over host RGB floats (HostRgbFloat), or where asked, NVDEC's own pictures in
// the GPU's memory (GpuPicture); the backbone's side (pipeline/frame_tensor.h) takes each kind
// without a copy to the host, converting 4:2:0 pictures on their device.
#ifndef VIDCLF_MEDIA_FRAME_BUFFER_H_
#define VIDCLF_MEDIA_FRAME_BUFFER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>

extern "C" {
#include <libavutil/frame.h>
#include <libavutil/pixfmt.h>
#include <libavutil/rational.h>
}

namespace vidclf::media {

enum class MemoryKind {
  kHost,
  kPinnedHost,  // page-locked: a GPU copies it by itself, beside its work
  kDevice,      // a CUDA device's (FrameBuffer::device_index)
};

enum class PixelFormat {
  kRgbFloat,  // normalised RGB float32: one plane, [3, H, W] or [H, W, 3] as its strides say
  kNv12,      // 8-bit 4:2:0 as NVDEC writes it: luma [H, W, 1], interleaved chroma [H/2, W/2, 2]
  kP010,      // 10-bit 4:2:0 in the high bits of 16-bit words, planes as kNv12's
};

// Where a buffer's planes start and how they are laid out, in elements of the format's type
// (float for kRgbFloat, uint8_t for kNv12, uint16_t for kP010).
struct FramePlane {
  const void* data = nullptr;
  std::array<int64_t, 3> shape{};
  std::array<int64_t, 3> strides{};
};

struct FrameBuffer {
  MemoryKind memory = MemoryKind::kHost;
  int device_index = -1;  // for MemoryKind::kDevice
  PixelFormat format = PixelFormat::kRgbFloat;
  // kRgbFloat: planes[0]; kNv12 and kP010: luma, then chroma.
  std::array<FramePlane, 2> planes{};
  // Keeps the memory alive for as long as a consumer holds a copy of this; null: the memory is the
  // caller's until the call that hands the frame over returns, so a consumer that keeps the frame
  // copies it.
  std::shared_ptr<const void> owner;
  // kNv12 and kP010: what the stream says of the picture, which its conversion needs. Untagged
  // streams are taken as BT.601, as libswscale takes them.
  AVColorSpace colourspace = AVCOL_SPC_UNSPECIFIED;
  bool full_range = false;
  AVRational sample_aspect_ratio = {0, 1};  // 0/1: square pixels
  int clockwise_quarter_turns = 0;          // the container's display rotation, 0..3

  // `height` x `width` host RGB floats, [H, W, 3] when `channels_last`, else [3, H, W], valid
  // during the call that hands them over (FrameConverter's output).
  static FrameBuffer HostRgbFloat(const float* pixels, int64_t height, int64_t width,
                                  bool channels_last);
  // An NVDEC picture (AV_PIX_FMT_CUDA) of CUDA device `device_index` as its NV12 or P010 planes,
  // holding a reference to the frame (its surface goes back to the decoder's pool when the last
  // copy goes); `clockwise_quarter_turns` as FrameConverter::quarter_turns. Nothing for a frame in
  // host memory or in another format (NVDEC's 4:4:4 and 16-bit ones), which is converted on the
  // host instead.
  static std::optional<FrameBuffer> GpuPicture(const AVFrame& frame, int device_index,
                                               int clockwise_quarter_turns);
  // The floats of an RGB frame in host memory, pinned or not; null for any other frame.
  const float* host_rgb_floats() const;
};

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_FRAME_BUFFER_H_
