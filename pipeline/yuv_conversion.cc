#include "pipeline/yuv_conversion.h"

#include <array>
#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "absl/synchronization/mutex.h"
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

// The conversion's constants, a [6, 3] float tensor: rows 0-2 the matrix that takes samples (Y,
// Cb, Cr, at their depth) to R, G and B in [0, 1] before clamping, transposed; row 3 its offsets;
// rows 4 and 5 the normalisation's scale (1 / std) and shift (-mean / std), channel by channel.
// E'Y in [0, 1], E'Pb and E'Pr in [-0.5, 0.5], then R, G and B (BT.601 section 2.5, BT.709
// section 3), folded into one affine map.
torch::Tensor MakeCoefficients(const Yuv420Picture& picture,
                               const media::PreprocessOptions& options) {
  const double to_8_bit = 1.0 / static_cast<double>(1 << (picture.bit_depth - 8));
  const double luma_offset = picture.full_range ? 0 : 16;
  const double luma_span = picture.full_range ? 255 : 219;
  const double chroma_span = picture.full_range ? 255 : 224;
  const LumaWeights w = WeightsOf(picture.colourspace);
  const double green_weight = 1 - w.red - w.blue;
  // R = y + red_pr * pr, B = y + blue_pb * pb, G = (y - w.red R - w.blue B) / green_weight.
  const double red_pr = 2 * (1 - w.red);
  const double blue_pb = 2 * (1 - w.blue);
  const double green_pr = -w.red * red_pr / green_weight;
  const double green_pb = -w.blue * blue_pb / green_weight;
  // y, pb and pr from the samples: y = luma_scale * Y + luma_shift, likewise pb and pr.
  const double luma_scale = to_8_bit / luma_span;
  const double luma_shift = -luma_offset / luma_span;
  const double chroma_scale = to_8_bit / chroma_span;
  const double chroma_shift = -128 / chroma_span;
  const std::array<std::array<double, 3>, 3> rgb_from_y_pb_pr = {{
      {1, 0, red_pr},
      {1, green_pb, green_pr},
      {1, blue_pb, 0},
  }};
  torch::Tensor coefficients = torch::empty({6, 3}, torch::kFloat);
  auto c = coefficients.accessor<float, 2>();
  for (int channel = 0; channel < 3; ++channel) {
    const std::array<double, 3>& row = rgb_from_y_pb_pr[channel];
    c[0][channel] = static_cast<float>(row[0] * luma_scale);
    c[1][channel] = static_cast<float>(row[1] * chroma_scale);
    c[2][channel] = static_cast<float>(row[2] * chroma_scale);
    c[3][channel] = static_cast<float>(row[0] * luma_shift + (row[1] + row[2]) * chroma_shift);
    c[4][channel] = static_cast<float>(1 / options.std[channel]);
    c[5][channel] = static_cast<float>(-options.mean[channel] / options.std[channel]);
  }
  return coefficients;
}

// MakeCoefficients on `device`, made there once for each kind of picture and normalisation (a
// handful in a process): copied for each picture, they would wait on a GPU for all the work
// queued before them.
torch::Tensor Coefficients(const Yuv420Picture& picture, const media::PreprocessOptions& options,
                           const torch::Device& device) {
  using Key = std::tuple<int, int, int, int, bool, std::array<float, 3>, std::array<float, 3>>;
  static absl::Mutex mutex;
  // Never destroyed: GPU tensors must not be freed after the driver has shut down.
  static auto* const made = new std::map<Key, torch::Tensor>();
  const Key key{static_cast<int>(device.type()),
                device.index(),
                picture.bit_depth,
                static_cast<int>(picture.colourspace),
                picture.full_range,
                options.mean,
                options.std};
  absl::MutexLock lock(&mutex);
  torch::Tensor& coefficients = (*made)[key];
  if (!coefficients.defined()) coefficients = MakeCoefficients(picture, options).to(device);
  return coefficients;
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
  // The conversion is a handful of kernels, each over the whole picture: a GPU serving dozens of
  // feeds runs every feed's in turn, and tiny kernels in their tens per frame were its limit.
  const torch::Tensor luma = Resize(picture.luma.narrow(0, region.y, region.height)
                                        .narrow(1, region.x, region.width)
                                        .to(torch::kFloat)
                                        .unsqueeze(0)
                                        .unsqueeze(0),
                                    crop, crop)[0][0];
  // libswscale computes an RGB picture's chroma at half its width when the width is even, one
  // value for each pair of pixels: so here too, for the model to see what it sees of frames
  // decoded on the CPU.
  const bool paired = crop % 2 == 0;
  const torch::Tensor chroma =
      Resize(picture.chroma.narrow(0, region.y / 2, (region.height + 1) / 2)
                 .narrow(1, region.x / 2, (region.width + 1) / 2)
                 .permute({2, 0, 1})
                 .to(torch::kFloat)
                 .unsqueeze(0),
             crop, paired ? crop / 2 : crop)[0];
  // [crop * crop, 3] samples (Y, Cb, Cr), pixel after pixel; each chroma value twice along the
  // rows by a view.
  torch::Tensor samples;
  if (paired) {
    const std::vector<int64_t> pairs = {crop, crop / 2, 2};
    samples = torch::stack({luma.view(pairs), chroma[0].unsqueeze(2).expand(pairs),
                            chroma[1].unsqueeze(2).expand(pairs)},
                           /*dim=*/-1);
  } else {
    samples = torch::stack({luma, chroma[0], chroma[1]}, /*dim=*/-1);
  }
  samples = samples.view({crop * crop, 3});
  const torch::Tensor coefficients = Coefficients(picture, options, samples.device());
  torch::Tensor rgb = torch::addmm(coefficients[3], samples, coefficients.narrow(0, 0, 3));
  rgb = torch::addcmul(coefficients[5], rgb.clamp_(0, 1), coefficients[4]).view({crop, crop, 3});
  if (picture.clockwise_quarter_turns % 4 != 0) {
    rgb = torch::rot90(rgb, -picture.clockwise_quarter_turns, {0, 1});
  }
  if (!options.channels_last) rgb = rgb.permute({2, 0, 1});
  return rgb.contiguous();
}

}  // namespace vidclf::pipeline
