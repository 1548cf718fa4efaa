// A decoder's frame (media::FrameBuffer) as the backbone takes it: a float tensor in the model's
// input layout, on the device that holds the frame. Where the frame's memory outlives the call (it
// has an owner) the tensor uses it in place; otherwise it is copied, on its own device.
#ifndef VIDCLF_PIPELINE_FRAME_TENSOR_H_
#define VIDCLF_PIPELINE_FRAME_TENSOR_H_

#include <torch/torch.h>

#include "absl/status/statusor.h"
#include "media/frame_buffer.h"
#include "model/video_model.h"

namespace vidclf::pipeline {

// [crop, crop, 3] when `model` runs channels-last, else [3, crop, crop]. INVALID_ARGUMENT for a
// frame of another shape or layout, or in a format the backbone cannot take (NV12 and P010 planes
// are converted to RGB first: yuv_conversion.h), or on a device this process cannot use.
absl::StatusOr<torch::Tensor> FrameTensor(const media::FrameBuffer& frame,
                                          const model::VideoModel& model);

}  // namespace vidclf::pipeline

#endif  // VIDCLF_PIPELINE_FRAME_TENSOR_H_
