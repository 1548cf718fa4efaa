#include "pipeline/frame_tensor.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "pipeline/video_pipeline.h"
#include "pipeline/yuv_conversion.h"

namespace vidclf::pipeline {
namespace {

// The tensor options of `frame`'s memory with `type`; INVALID_ARGUMENT for a GPU this process
// does not have.
absl::StatusOr<torch::TensorOptions> MemoryOf(const media::FrameBuffer& frame,
                                              torch::ScalarType type) {
  torch::TensorOptions options = torch::TensorOptions().dtype(type);
  if (frame.memory != media::MemoryKind::kDevice) return options;
  if (frame.device_index < 0 ||
      frame.device_index >= static_cast<int>(torch::cuda::device_count())) {
    return absl::InvalidArgumentError(absl::StrCat("a frame on CUDA device ", frame.device_index,
                                                   ", which this process does not have"));
  }
  return options.device(torch::kCUDA, static_cast<c10::DeviceIndex>(frame.device_index));
}

// Plane `index` of `frame` as a tensor of `shape` that uses its memory in place, keeping the
// frame's owner (if any) alive for as long as the tensor.
torch::Tensor PlaneTensor(const media::FrameBuffer& frame, int index,
                          const std::vector<int64_t>& shape, const torch::TensorOptions& options) {
  const media::FramePlane& plane = frame.planes[index];
  // from_blob does not write through the pointer; it only takes a non-const one.
  void* data = const_cast<void*>(plane.data);
  const std::vector<int64_t> strides(plane.strides.begin(), plane.strides.begin() + shape.size());
  if (frame.owner == nullptr) return torch::from_blob(data, shape, strides, options);
  return torch::from_blob(
      data, shape, strides, [owner = frame.owner](void* /*data*/) {}, options);
}

absl::StatusOr<torch::Tensor> RgbTensor(const media::FrameBuffer& frame,
                                        const media::PreprocessOptions& preprocess) {
  const media::FramePlane& plane = frame.planes[0];
  const int64_t side = preprocess.crop_size;
  const std::vector<int64_t> shape = preprocess.channels_last ? std::vector<int64_t>{side, side, 3}
                                                              : std::vector<int64_t>{3, side, side};
  if (plane.data == nullptr ||
      !std::equal(shape.begin(), shape.end(), plane.shape.begin(), plane.shape.end())) {
    return absl::InvalidArgumentError(
        absl::StrCat("a frame of shape [", absl::StrJoin(plane.shape, ", "),
                     "] for a model that takes [", absl::StrJoin(shape, ", "), "]"));
  }
  absl::StatusOr<torch::TensorOptions> options = MemoryOf(frame, torch::kFloat);
  if (!options.ok()) return options.status();
  const torch::Tensor pixels = PlaneTensor(frame, 0, shape, *options);
  // Memory valid only during the call is copied, on its own device.
  return frame.owner != nullptr ? pixels : pixels.clone();
}

// NV12 and P010 planes converted on their device (yuv_conversion.h).
absl::StatusOr<torch::Tensor> YuvTensor(const media::FrameBuffer& frame,
                                        const media::PreprocessOptions& preprocess) {
  const media::FramePlane& luma = frame.planes[0];
  const media::FramePlane& chroma = frame.planes[1];
  const int64_t height = luma.shape[0];
  const int64_t width = luma.shape[1];
  if (luma.data == nullptr || chroma.data == nullptr || height < 1 || width < 1 ||
      luma.shape[2] != 1 || chroma.shape[0] != (height + 1) / 2 ||
      chroma.shape[1] != (width + 1) / 2 || chroma.shape[2] != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("4:2:0 planes of shapes [", absl::StrJoin(luma.shape, ", "), "] and [",
                     absl::StrJoin(chroma.shape, ", "),
                     "]: chroma must be [(H + 1) / 2, (W + 1) / 2, 2] for ", "luma [H, W, 1]"));
  }
  const bool deep = frame.format == media::PixelFormat::kP010;
  absl::StatusOr<torch::TensorOptions> options =
      MemoryOf(frame, deep ? torch::kShort : torch::kByte);
  if (!options.ok()) return options.status();
  Yuv420Picture picture;
  picture.luma = PlaneTensor(frame, 0, {height, width}, *options);
  picture.chroma = PlaneTensor(frame, 1, {chroma.shape[0], chroma.shape[1], 2}, *options);
  if (deep) {
    // P010's 10 bits lie in the high bits of 16, whose low 6 are 0: as 16-bit samples they scale
    // to the same levels. LibTorch has no unsigned 16-bit type.
    picture.luma = torch::bitwise_and(picture.luma.to(torch::kInt), 0xFFFF);
    picture.chroma = torch::bitwise_and(picture.chroma.to(torch::kInt), 0xFFFF);
    picture.bit_depth = 16;
  }
  picture.colourspace = frame.colourspace;
  picture.full_range = frame.full_range;
  picture.sample_aspect_ratio = frame.sample_aspect_ratio;
  picture.clockwise_quarter_turns = frame.clockwise_quarter_turns;
  return ConvertYuv420(picture, preprocess);
}

}  // namespace

absl::StatusOr<torch::Tensor> FrameTensor(const media::FrameBuffer& frame,
                                          const media::PreprocessOptions& preprocess) {
  try {
    return frame.format == media::PixelFormat::kRgbFloat ? RgbTensor(frame, preprocess)
                                                         : YuvTensor(frame, preprocess);
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot take the frame: ", e.what_without_backtrace()));
  }
}

absl::StatusOr<torch::Tensor> FrameTensor(const media::FrameBuffer& frame,
                                          const model::VideoModel& model) {
  return FrameTensor(frame, ModelPreprocessing(model));
}

}  // namespace vidclf::pipeline
