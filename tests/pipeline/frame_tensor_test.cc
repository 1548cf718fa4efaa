#include "pipeline/frame_tensor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "pipeline/video_pipeline.h"
#include "pipeline/yuv_conversion.h"

namespace vidclf::pipeline {
namespace {

using ::testing::HasSubstr;

constexpr int kSide = 32;

std::unique_ptr<model::VideoModel> TinyModel(bool channels_last) {
  model::ModelConfig config;
  config.name = "tiny";
  config.version = "1";
  config.labels = {"a", "b"};
  config.input.crop_size = kSide;
  config.input.resize_shorter_side = kSide;
  model::InferenceOptions options = model::InferenceOptions::Exact();
  options.channels_last = channels_last;
  auto model = model::VideoModel::Create(config, options);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

TEST(FrameTensor, CopiesAFrameValidOnlyDuringTheCall) {
  const auto model = TinyModel(/*channels_last=*/false);
  ASSERT_NE(model, nullptr);
  std::vector<float> pixels(3 * kSide * kSide);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<float>(i);
  const absl::StatusOr<torch::Tensor> tensor =
      FrameTensor(media::FrameBuffer::HostRgbFloat(pixels.data(), kSide, kSide, false), *model);
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  EXPECT_EQ(tensor->sizes(), (std::vector<int64_t>{3, kSide, kSide}));
  EXPECT_EQ((*tensor)[2][7][5].item<float>(),
            static_cast<float>(2 * kSide * kSide + 7 * kSide + 5));
  EXPECT_NE(tensor->data_ptr<float>(), pixels.data());
  pixels[0] = -1;
  EXPECT_EQ((*tensor)[0][0][0].item<float>(), 0);
}

TEST(FrameTensor, TakesAFrameWithAnOwnerInPlaceAndKeepsItAlive) {
  const auto model = TinyModel(/*channels_last=*/true);
  ASSERT_NE(model, nullptr);
  auto pixels = std::make_shared<std::vector<float>>(3 * kSide * kSide, 0.5f);
  media::FrameBuffer frame =
      media::FrameBuffer::HostRgbFloat(pixels->data(), kSide, kSide, /*channels_last=*/true);
  frame.owner = pixels;
  const absl::StatusOr<torch::Tensor> tensor = FrameTensor(frame, *model);
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  EXPECT_EQ(tensor->sizes(), (std::vector<int64_t>{kSide, kSide, 3}));
  EXPECT_EQ(tensor->data_ptr<float>(), pixels->data());
  const std::weak_ptr<std::vector<float>> watch = pixels;
  frame.owner.reset();
  pixels.reset();
  EXPECT_FALSE(watch.expired());  // the tensor holds it
  EXPECT_EQ(tensor->sum().item<float>(), 0.5f * 3 * kSide * kSide);
}

TEST(FrameTensor, RefusesFramesTheBackboneCannotTake) {
  const auto model = TinyModel(/*channels_last=*/true);
  ASSERT_NE(model, nullptr);
  std::vector<float> pixels(3 * kSide * kSide);
  // Planar frames for a channels-last model.
  absl::Status status =
      FrameTensor(media::FrameBuffer::HostRgbFloat(pixels.data(), kSide, kSide, false), *model)
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("[3, 32, 32] for a model that takes [32, 32, 3]"));
  // 4:2:0 planes whose chroma does not fit their luma.
  std::vector<uint8_t> samples(64 * 64);
  media::FrameBuffer nv12;
  nv12.format = media::PixelFormat::kNv12;
  nv12.planes[0] = {samples.data(), {40, 40, 1}, {40, 1, 1}};
  nv12.planes[1] = {samples.data(), {10, 20, 2}, {40, 2, 1}};
  status = FrameTensor(nv12, *model).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("4:2:0 planes of shapes [40, 40, 1] and [10, 20, 2]"));
  // No pixels at all.
  status =
      FrameTensor(media::FrameBuffer::HostRgbFloat(nullptr, kSide, kSide, true), *model).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
}

// 4:2:0 samples of a `width` x `height` picture in rows of `stride` samples (wider than the
// picture, as a decoder's are): luma, then interleaved chroma. 10 bits when `deep`.
struct Samples {
  std::vector<int> luma;
  std::vector<int> chroma;
};

Samples MakeSamples(int width, int height, int stride, bool deep) {
  Samples samples;
  samples.luma.assign(static_cast<size_t>(stride) * height, 0);
  samples.chroma.assign(static_cast<size_t>(stride) * ((height + 1) / 2), 0);
  const int top = deep ? 1023 : 255;
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) samples.luma[y * stride + x] = (x * 7 + y * 13) % (top + 1);
  }
  for (int y = 0; y < (height + 1) / 2; ++y) {
    for (int x = 0; x < 2 * ((width + 1) / 2); ++x) {
      samples.chroma[y * stride + x] = (x * 11 + y * 5 + 64) % (top + 1);
    }
  }
  return samples;
}

// The samples as a decoder's NV12 or P010 frame (P010: 10 bits in the high bits of 16).
template <typename Sample>
media::FrameBuffer MakePicture(const std::vector<Sample>& luma, const std::vector<Sample>& chroma,
                               int width, int height, int stride) {
  media::FrameBuffer picture;
  picture.format = sizeof(Sample) == 1 ? media::PixelFormat::kNv12 : media::PixelFormat::kP010;
  picture.planes[0] = {luma.data(), {height, width, 1}, {stride, 1, 1}};
  picture.planes[1] = {chroma.data(), {(height + 1) / 2, (width + 1) / 2, 2}, {stride, 2, 1}};
  picture.colourspace = AVCOL_SPC_BT709;
  picture.full_range = true;
  picture.sample_aspect_ratio = {4, 3};
  picture.clockwise_quarter_turns = 1;
  return picture;
}

// The same picture as the tensor conversion takes it: 10-bit samples in the low bits.
Yuv420Picture AsYuv420Picture(const Samples& samples, int width, int height, int stride,
                              bool deep) {
  const torch::ScalarType type = deep ? torch::kInt16 : torch::kUInt8;
  Yuv420Picture picture;
  picture.luma = torch::tensor(samples.luma, torch::kInt32)
                     .view({height, stride})
                     .narrow(1, 0, width)
                     .to(type);
  picture.chroma = torch::tensor(samples.chroma, torch::kInt32)
                       .view({(height + 1) / 2, stride / 2, 2})
                       .narrow(1, 0, (width + 1) / 2)
                       .to(type);
  picture.bit_depth = deep ? 10 : 8;
  picture.colourspace = AVCOL_SPC_BT709;
  picture.full_range = true;
  picture.sample_aspect_ratio = {4, 3};
  picture.clockwise_quarter_turns = 1;
  return picture;
}

// A GPU decoder's pictures (here in host memory, which takes the same path) become the model's
// input by the tensor conversion, with the stream's colours, pixel shape and rotation, whatever
// their row stride; P010's high-bit samples give what 10-bit samples give.
TEST(FrameTensor, ConvertsNv12AndP010PicturesByTheTensorConversion) {
  constexpr int kWidth = 61, kHeight = 45, kStride = 72;
  for (const bool channels_last : {false, true}) {
    const auto model = TinyModel(channels_last);
    ASSERT_NE(model, nullptr);
    const media::PreprocessOptions preprocess = ModelPreprocessing(*model);
    for (const bool deep : {false, true}) {
      const Samples samples = MakeSamples(kWidth, kHeight, kStride, deep);
      absl::StatusOr<torch::Tensor> tensor;
      if (deep) {
        std::vector<uint16_t> luma(samples.luma.begin(), samples.luma.end());
        std::vector<uint16_t> chroma(samples.chroma.begin(), samples.chroma.end());
        for (uint16_t& sample : luma) sample = static_cast<uint16_t>(sample << 6);
        for (uint16_t& sample : chroma) sample = static_cast<uint16_t>(sample << 6);
        tensor = FrameTensor(MakePicture(luma, chroma, kWidth, kHeight, kStride), *model);
      } else {
        std::vector<uint8_t> luma(samples.luma.begin(), samples.luma.end());
        std::vector<uint8_t> chroma(samples.chroma.begin(), samples.chroma.end());
        tensor = FrameTensor(MakePicture(luma, chroma, kWidth, kHeight, kStride), *model);
      }
      ASSERT_TRUE(tensor.ok()) << tensor.status();
      const torch::Tensor expected =
          ConvertYuv420(AsYuv420Picture(samples, kWidth, kHeight, kStride, deep), preprocess);
      EXPECT_EQ(tensor->sizes(), expected.sizes());
      EXPECT_TRUE(torch::allclose(*tensor, expected, /*rtol=*/0, /*atol=*/1e-6))
          << "deep: " << deep << ", channels last: " << channels_last;
    }
  }
}

// Device memory stays on its device; where no GPU is usable the frame is refused, not misread.
TEST(FrameTensor, KeepsDeviceFramesOnTheirDevice) {
  const auto model = TinyModel(/*channels_last=*/false);
  ASSERT_NE(model, nullptr);
  if (!torch::cuda::is_available()) {
    std::vector<float> pixels(3 * kSide * kSide);
    media::FrameBuffer frame = media::FrameBuffer::HostRgbFloat(pixels.data(), kSide, kSide, false);
    frame.memory = media::MemoryKind::kDevice;
    frame.device_index = 0;
    EXPECT_EQ(FrameTensor(frame, *model).status().code(), absl::StatusCode::kInvalidArgument);
    GTEST_SKIP() << "no CUDA device: the refusal checked, the device path not";
  }
  const torch::Tensor on_gpu = torch::rand({3, kSide, kSide}, torch::kCUDA);
  media::FrameBuffer frame =
      media::FrameBuffer::HostRgbFloat(on_gpu.data_ptr<float>(), kSide, kSide, false);
  frame.memory = media::MemoryKind::kDevice;
  frame.device_index = 0;
  const absl::StatusOr<torch::Tensor> tensor = FrameTensor(frame, *model);
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  EXPECT_TRUE(tensor->is_cuda());
  EXPECT_TRUE(torch::equal(*tensor, on_gpu));
}

}  // namespace
}  // namespace vidclf::pipeline
