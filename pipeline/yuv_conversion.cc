#include "pipeline/yuv_conversion.h"

#include <array>
#include <cstdint>
#include <vector>

#include "media/crop_geometry.h"

namespace vidclf::pipeline {
namespace {

namespace F = torch::nn::functional;

// The luma weights of red and blue of a YUV matrix (its ITU or SMPTE definition).
struct LumaWeights {
  double red = 0.299;
  double blue = 0.114;
};

LumaWeights WeightsOf(AVColorSpace colourspace) {
  switch (colourspace) {
    case AVCOL_SPC_BT709:
      return {0.2126, 0.0722};
    case AVCOL_SPC_BT2020_NCL:
    case AVCOL_SPC_BT2020_CL:
      return {0.2627, 0.0593};
    case AVCOL_SPC_SMPTE240M:
      return {0.212, 0.087};
    case AVCOL_SPC_FCC:
      return {0.30, 0.11};
    default:  // BT.601 (BT470BG, SMPTE170M), and untagged streams
      return {0.299, 0.114};
  }
}

// `planes` [1, C, H, W] resized to `height` x `width`.
torch::Tensor Resize(const torch::Tensor& planes, int height, int width) {
  return F::interpolate(planes, F::InterpolateFuncOptions()
                                    .size(std::vector<int64_t>{height, width})
                                    .mode(torch::kBilinear)
                                    .align_corners(false)
                                    .antialias(true));
}

}  // namespace

torch::Tensor ConvertYuv420(const Yuv420Picture& picture, const media::PreprocessOptions& options) {
  const int height = static_cast<int>(picture.luma.size(0));
  const int width = static_cast<int>(picture.luma.size(1));
  const int crop = options.crop_size;
  const media::CropGeometry geometry =
      media::PlaceCrop(width, height, picture.sample_aspect_ratio, picture.clockwise_quarter_turns,
                       options.resize_shorter_side, crop);
  // Only the stored pixels the crop shows are resized, straight to the crop's size, as
  // FrameConverter has libswscale do; their left and top edges lie on the chroma grid.
  const media::StoredRegion region =
      media::PlaceStoredRegion(width, height, geometry, crop, /*log2_chroma_w=*/1,
                               /*log2_chroma_h=*/1);
  // Samples in 8-bit levels, whatever their depth.
  const double to_8_bit = 1.0 / static_cast<double>(1 << (picture.bit_depth - 8));
  const torch::Tensor luma = Resize(picture.luma.narrow(0, region.y, region.height)
                                        .narrow(1, region.x, region.width)
                                        .to(torch::kFloat)
                                        .mul(to_8_bit)
                                        .unsqueeze(0)
                                        .unsqueeze(0),
                                    crop, crop)[0][0];
  // libswscale computes an RGB picture's chroma at half its width when the width is even, one
  // value for each pair of pixels: so here too, for the model to see what it sees of frames
  // decoded on the CPU.
  const bool paired = crop % 2 == 0;
  torch::Tensor chroma = Resize(picture.chroma.narrow(0, region.y / 2, (region.height + 1) / 2)
                                    .narrow(1, region.x / 2, (region.width + 1) / 2)
                                    .permute({2, 0, 1})
                                    .to(torch::kFloat)
                                    .mul(to_8_bit)
                                    .unsqueeze(0),
                                crop, paired ? crop / 2 : crop)[0];
  // Each value twice along the rows, by a view: repeat_interleave would wait for the GPU.
  if (paired) chroma = chroma.unsqueeze(3).expand({2, crop, crop / 2, 2}).reshape({2, crop, crop});

  // E'Y in [0, 1], E'Pb and E'Pr in [-0.5, 0.5], then R, G and B (BT.601 section 2.5, BT.709
  // section 3).
  const double luma_offset = picture.full_range ? 0 : 16;
  const double luma_span = picture.full_range ? 255 : 219;
  const double chroma_span = picture.full_range ? 255 : 224;
  const torch::Tensor y = (luma - luma_offset) / luma_span;
  const torch::Tensor pb = (chroma[0] - 128) / chroma_span;
  const torch::Tensor pr = (chroma[1] - 128) / chroma_span;
  const LumaWeights weights = WeightsOf(picture.colourspace);
  const torch::Tensor red = y + 2 * (1 - weights.red) * pr;
  const torch::Tensor blue = y + 2 * (1 - weights.blue) * pb;
  const torch::Tensor green =
      (y - weights.red * red - weights.blue * blue) / (1 - weights.red - weights.blue);
  // Normalised channel by channel with scalars: a tensor of the constants would be copied to the
  // GPU, which waits for all the work queued before it.
  const std::array<torch::Tensor, 3> channels = {red, green, blue};
  std::vector<torch::Tensor> normalised;
  for (size_t c = 0; c < channels.size(); ++c) {
    normalised.push_back((channels[c].clamp(0, 1) - options.mean[c]) / options.std[c]);
  }
  torch::Tensor rgb = torch::stack(normalised);
  if (picture.clockwise_quarter_turns % 4 != 0) {
    rgb = torch::rot90(rgb, -picture.clockwise_quarter_turns, {1, 2});
  }
  if (options.channels_last) rgb = rgb.permute({1, 2, 0});
  return rgb.contiguous();
}

}  // namespace vidclf::pipeline
