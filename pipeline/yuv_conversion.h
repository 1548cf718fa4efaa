// A GPU decoder's pictures (NV12, P010: 4:2:0 planes with Cb and Cr interleaved) to the model's
// input with tensor operations, on whatever device the planes live: the same crop, colours and
// normalisation as media::FrameConverter gives with libswscale on the host, so that frames
// decoded on NVDEC need not leave the GPU to be converted. On CPU tensors it runs the same code,
// which is how CI checks it against FrameConverter (tests/pipeline/yuv_conversion_test.cc states
// the tolerance).
#ifndef VIDCLF_PIPELINE_YUV_CONVERSION_H_
#define VIDCLF_PIPELINE_YUV_CONVERSION_H_

#include <torch/torch.h>

#include "media/frame_converter.h"

extern "C" {
#include <libavutil/pixfmt.h>
#include <libavutil/rational.h>
}

namespace vidclf::pipeline {

// One 4:2:0 picture and what its stream says of it.
struct Yuv420Picture {
  // [H, W] luma samples, integers (uint8, or int16/int32 for deeper samples).
  torch::Tensor luma;
  // [(H + 1) / 2, (W + 1) / 2, 2]: Cb and Cr samples, interleaved as NV12 and P010 store them.
  torch::Tensor chroma;
  // Significant bits per sample, held in the low bits (P010 holds them in the high ones: shift
  // its samples right by 6 first).
  int bit_depth = 8;
  // The stream's YUV matrix; untagged streams are taken as BT.601, as libswscale takes them.
  AVColorSpace colourspace = AVCOL_SPC_UNSPECIFIED;
  bool full_range = false;
  AVRational sample_aspect_ratio = {0, 1};  // 0/1: square pixels
  int clockwise_quarter_turns = 0;          // the container's display rotation, 0..3
};

// The picture as `options` prepare a frame: [3, crop, crop] float (or [crop, crop, 3] with
// options.channels_last), contiguous, on the picture's device. The picture's shorter displayed
// side is resized with a bilinear filter that widens as it shrinks (as libswscale's does), its
// chroma taken as centred between luma samples (libswscale's default).
torch::Tensor ConvertYuv420(const Yuv420Picture& picture, const media::PreprocessOptions& options);

}  // namespace vidclf::pipeline

#endif  // VIDCLF_PIPELINE_YUV_CONVERSION_H_
