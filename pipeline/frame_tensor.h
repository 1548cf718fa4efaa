// A decoder's frame (media::FrameBuffer) as the backbone takes it: a float tensor in the model's
// input layout, on the device that holds the frame. An RGB frame whose memory outlives the call (it
// has an owner) is used in place, otherwise copied on its own device; NV12 and P010 pictures (a
// GPU decoder's) are converted there (yuv_conversion.h).
#ifndef VIDCLF_PIPELINE_FRAME_TENSOR_H_
#define VIDCLF_PIPELINE_FRAME_TENSOR_H_

#include <torch/torch.h>

#include "absl/status/statusor.h"
#include "media/frame_buffer.h"
#include "media/frame_converter.h"
#include "model/video_model.h"

namespace vidclf::pipeline {

// [crop, crop, 3] when `model` runs channels-last, else [3, crop, crop]. INVALID_ARGUMENT for an
// RGB frame of another shape or layout, 4:2:0 planes whose shapes do not agree, or a frame on a
// device this process cannot use. Kernels on a GPU's frame run on the calling thread's current
// stream, which must be ordered after the decoder's copy into the frame (libavcodec's and
// LibTorch's default stream both are the legacy one).
absl::StatusOr<torch::Tensor> FrameTensor(const media::FrameBuffer& frame,
                                          const model::VideoModel& model);
// The same with the model's preprocessing given (video_pipeline.h: ModelPreprocessing).
absl::StatusOr<torch::Tensor> FrameTensor(const media::FrameBuffer& frame,
                                          const media::PreprocessOptions& preprocess);

}  // namespace vidclf::pipeline

#endif  // VIDCLF_PIPELINE_FRAME_TENSOR_H_
