#include "pipeline/frame_tensor.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace vidclf::pipeline {

absl::StatusOr<torch::Tensor> FrameTensor(const media::FrameBuffer& frame,
                                          const model::VideoModel& model) {
  if (frame.format != media::PixelFormat::kRgbFloat) {
    return absl::InvalidArgumentError(
        "the backbone takes RGB float frames; convert 4:2:0 planes to RGB first");
  }
  const media::FramePlane& plane = frame.planes[0];
  const int64_t side = model.config().input.crop_size;
  const std::vector<int64_t> shape = model.channels_last() ? std::vector<int64_t>{side, side, 3}
                                                           : std::vector<int64_t>{3, side, side};
  if (plane.data == nullptr ||
      !std::equal(shape.begin(), shape.end(), plane.shape.begin(), plane.shape.end())) {
    return absl::InvalidArgumentError(
        absl::StrCat("a frame of shape [", absl::StrJoin(plane.shape, ", "),
                     "] for a model that takes [", absl::StrJoin(shape, ", "), "]"));
  }
  try {
    torch::TensorOptions options = torch::TensorOptions().dtype(torch::kFloat);
    if (frame.memory == media::MemoryKind::kDevice) {
      if (frame.device_index < 0 ||
          frame.device_index >= static_cast<int>(torch::cuda::device_count())) {
        return absl::InvalidArgumentError(absl::StrCat("a frame on CUDA device ",
                                                       frame.device_index, ", which this process ",
                                                       "does not have"));
      }
      options = options.device(torch::kCUDA, static_cast<c10::DeviceIndex>(frame.device_index));
    }
    // from_blob does not write through the pointer; it only takes a non-const one.
    void* data = const_cast<void*>(plane.data);
    const std::vector<int64_t> strides(plane.strides.begin(), plane.strides.end());
    if (frame.owner != nullptr) {
      return torch::from_blob(
          data, shape, strides, [owner = frame.owner](void* /*data*/) {}, options);
    }
    return torch::from_blob(data, shape, strides, options).clone();
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot take the frame: ", e.what_without_backtrace()));
  }
}

}  // namespace vidclf::pipeline
