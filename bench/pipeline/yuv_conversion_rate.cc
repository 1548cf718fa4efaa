// How many pictures a second pipeline::ConvertYuv420 turns into the model's input, on the CPU and
// on a GPU, beside media::FrameConverter (libswscale) on the same pictures on the host, and how
// far the GPU's answers are from the CPU's. One JSON line per picture size and converter.
//
//   vidclf-yuv-conversion-rate [--sizes 1280x720,1920x1080] [--devices cpu,cuda:0] [--rounds 9]
//                              [--pictures 64] [--crop 112] [--resize 128]
#include <chrono>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/median.h"
#include "media/av_util.h"
#include "media/frame_converter.h"
#include "pipeline/yuv_conversion.h"

ABSL_FLAG(std::string, sizes, "1280x720,1920x1080",
          "Picture sizes, WIDTHxHEIGHT, comma-separated.");
ABSL_FLAG(std::string, devices, "cpu,cuda:0",
          "Devices of the tensor conversion; a CUDA device "
          "that is not there is left out.");
ABSL_FLAG(int, rounds, 9, "Timed rounds; the median is reported.");
ABSL_FLAG(int, pictures, 64, "Pictures converted per round.");
ABSL_FLAG(int, crop, 112, "The model's crop size.");
ABSL_FLAG(int, resize, 128, "The shorter side before the crop.");

namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// An 8-bit BT.709 picture with detail in every plane, as NV12 tensors on the CPU.
vidclf::pipeline::Yuv420Picture MakePicture(int width, int height) {
  const auto x = torch::arange(width, torch::kFloat).view({1, width});
  const auto y = torch::arange(height, torch::kFloat).view({height, 1});
  vidclf::pipeline::Yuv420Picture picture;
  picture.luma = (126 + 80 * torch::sin(x / 9) * torch::cos(y / 13)).to(torch::kUInt8);
  const auto cx = x.narrow(1, 0, (width + 1) / 2);
  const auto cy = y.narrow(0, 0, (height + 1) / 2);
  picture.chroma =
      torch::stack(
          {128 + 60 * torch::sin(cx / 11 + cy / 17), 128 + 60 * torch::cos(cx / 15 - cy / 7)}, 2)
          .to(torch::kUInt8);
  picture.colourspace = AVCOL_SPC_BT709;
  return picture;
}

// The same picture as a decoder's YUV 4:2:0 planar host frame.
vidclf::media::FramePtr MakeFrame(const vidclf::pipeline::Yuv420Picture& picture) {
  vidclf::media::FramePtr frame(av_frame_alloc());
  frame->format = AV_PIX_FMT_YUV420P;
  frame->width = static_cast<int>(picture.luma.size(1));
  frame->height = static_cast<int>(picture.luma.size(0));
  frame->colorspace = picture.colourspace;
  frame->color_range = AVCOL_RANGE_MPEG;
  if (av_frame_get_buffer(frame.get(), 0) < 0) return nullptr;
  const auto copy = [&](const torch::Tensor& plane, int index) {
    const auto rows = plane.contiguous();
    for (int64_t row = 0; row < rows.size(0); ++row) {
      std::memcpy(frame->data[index] + row * frame->linesize[index], rows[row].data_ptr<uint8_t>(),
                  rows.size(1));
    }
  };
  copy(picture.luma, 0);
  copy(picture.chroma.select(2, 0), 1);
  copy(picture.chroma.select(2, 1), 2);
  return frame;
}

// Pictures per second of `convert` (which converts one), the median of the rounds.
template <typename Convert>
double Rate(Convert convert, bool on_cuda) {
  std::vector<double> rates;
  for (int round = -1; round < absl::GetFlag(FLAGS_rounds); ++round) {  // round -1 warms up
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < absl::GetFlag(FLAGS_pictures); ++i) convert();
    if (on_cuda) torch::cuda::synchronize();
    if (round >= 0) rates.push_back(absl::GetFlag(FLAGS_pictures) / SecondsSince(start));
  }
  return vidclf::bench::Median(rates);
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  torch::NoGradGuard no_grad;
  vidclf::media::PreprocessOptions options;
  options.crop_size = absl::GetFlag(FLAGS_crop);
  options.resize_shorter_side = absl::GetFlag(FLAGS_resize);
  for (const absl::string_view size : absl::StrSplit(absl::GetFlag(FLAGS_sizes), ',')) {
    const std::vector<std::string> sides = absl::StrSplit(size, 'x');
    int width = 0, height = 0;
    if (sides.size() != 2 || !absl::SimpleAtoi(sides[0], &width) ||
        !absl::SimpleAtoi(sides[1], &height)) {
      std::cerr << "vidclf-yuv-conversion-rate: \"" << size << "\" is no WIDTHxHEIGHT\n";
      return 2;
    }
    const vidclf::pipeline::Yuv420Picture picture = MakePicture(width, height);
    const vidclf::media::FramePtr frame = MakeFrame(picture);
    vidclf::media::FrameConverter converter(options);
    std::vector<float> converted(converter.output_floats());
    const double swscale = Rate([&] { (void)converter.Convert(*frame, converted.data()); }, false);
    std::cout << nlohmann::json{{"size", size},
                                {"converter", "swscale"},
                                {"device", "cpu"},
                                {"pictures_per_second", swscale}}
                     .dump()
              << std::endl;
    const torch::Tensor on_cpu = vidclf::pipeline::ConvertYuv420(picture, options);
    for (const absl::string_view name : absl::StrSplit(absl::GetFlag(FLAGS_devices), ',')) {
      const torch::Device device{std::string(name)};
      if (device.is_cuda() && !torch::cuda::is_available()) continue;
      vidclf::pipeline::Yuv420Picture there = picture;
      there.luma = picture.luma.to(device);
      there.chroma = picture.chroma.to(device);
      const double rate =
          Rate([&] { (void)vidclf::pipeline::ConvertYuv420(there, options); }, device.is_cuda());
      const double largest = (vidclf::pipeline::ConvertYuv420(there, options).cpu() - on_cpu)
                                 .abs()
                                 .max()
                                 .item<double>();
      std::cout << nlohmann::json{{"size", size},
                                  {"converter", "tensors"},
                                  {"device", std::string(name)},
                                  {"pictures_per_second", rate},
                                  {"largest_difference_from_cpu", largest}}
                       .dump()
                << std::endl;
    }
  }
  return 0;
}
