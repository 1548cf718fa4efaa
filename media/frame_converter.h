// Turns decoded frames into normalised float images, the input a CNN expects.
#ifndef VIDCLF_MEDIA_FRAME_CONVERTER_H_
#define VIDCLF_MEDIA_FRAME_CONVERTER_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "media/av_util.h"
#include "media/frame_buffer.h"

namespace vidclf::media {

struct PreprocessOptions {
  // The shorter side of the frame is resized to this many pixels, keeping the aspect ratio.
  int resize_shorter_side = 256;
  // Then a centred square of this many pixels is cut out; must not exceed resize_shorter_side.
  int crop_size = 224;
  // Per-channel (R, G, B) normalisation: (value / 255 - mean) / std. ImageNet's by default.
  std::array<float, 3> mean = {0.485f, 0.456f, 0.406f};
  std::array<float, 3> std = {0.229f, 0.224f, 0.225f};
  // Layout of each converted frame: planar (C, H, W), or interleaved (H, W, C), which is the
  // memory of a channels-last tensor, so a channels-last model reads the frames without a copy.
  bool channels_last = false;
};

// Checks that the options describe a possible conversion.
absl::Status ValidatePreprocessOptions(const PreprocessOptions& options);

// Converts frames of any pixel format and size with libswscale: shorter-side resize (bilinear),
// centre crop, RGB, normalisation, written planar (C, H, W) or interleaved (H, W, C) into
// caller-owned memory. Frames are shown as a player would: non-square pixels are stretched to the
// display aspect ratio (the frame's sample_aspect_ratio) and the display rotation set with
// set_rotation is applied.
//
// Only the stored pixels that the crop shows are resized, straight to the crop's size; the result
// is that of resizing the whole frame and cropping, shifted by at most one stored pixel for 4:2:0
// (the region's edges are rounded to whole pixels, its left and top ones to the chroma grid).
// Formats whose planes cannot be addressed from an offset (bitstream, paletted, Bayer) take the
// whole-frame path. Frames in GPU memory (NVDEC's) are copied to the host first.
//
// Keeps a scaling context and an RGB buffer between calls, reused while the frame size and format
// stay the same. Not thread-safe: use one converter per thread.
class FrameConverter {
 public:
  // `options` must pass ValidatePreprocessOptions.
  explicit FrameConverter(const PreprocessOptions& options);
  ~FrameConverter();
  FrameConverter(const FrameConverter&) = delete;
  FrameConverter& operator=(const FrameConverter&) = delete;

  // Number of floats Convert writes: 3 * crop_size * crop_size.
  int64_t output_floats() const;

  // Rotation to apply, clockwise, as a container's display matrix asks; rounded to a multiple of
  // 90 degrees. 0 by default.
  void set_rotation(double clockwise_degrees);
  // That rotation in quarter turns, 0..3.
  int quarter_turns() const { return quarter_turns_; }

  // Writes output_floats() floats to `out`, in the layout the options ask for.
  absl::Status Convert(const AVFrame& frame, float* out);
  // What Convert wrote at `out`, as the backbone's side takes frames. Reads only the options, so
  // any thread may call it.
  FrameBuffer Output(const float* out) const;

  // Resizes the whole frame and then crops, as for formats that cannot be cropped first; slower.
  // For comparing the two paths in tests and benchmarks. Off by default.
  void set_whole_frame_resize(bool whole_frame) { whole_frame_resize_ = whole_frame; }

 private:
  PreprocessOptions options_;
  SwsContext* scaler_ = nullptr;  // owned; sws_getCachedContext reuses or replaces it
  std::vector<uint8_t> rgb_;      // RGBA: the resized region, or the whole resized frame
  FramePtr downloaded_;           // the host copy of a frame in GPU memory
  std::array<float, 3> scale_;    // 1 / (255 * std)
  std::array<float, 3> offset_;   // -mean / std
  int quarter_turns_ = 0;         // clockwise, 0..3
  bool whole_frame_resize_ = false;
  // Tells scaler_ the frame's YUV matrix and range.
  void SetColourspace(const AVFrame& frame);
  // Writes a frame in host memory.
  absl::Status ConvertHostFrame(const AVFrame& frame, float* out);
};

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_FRAME_CONVERTER_H_
