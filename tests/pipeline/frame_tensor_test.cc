#include "pipeline/frame_tensor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

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
  // 4:2:0 planes before their conversion.
  media::FrameBuffer nv12 = media::FrameBuffer::HostRgbFloat(pixels.data(), kSide, kSide, true);
  nv12.format = media::PixelFormat::kNv12;
  status = FrameTensor(nv12, *model).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("convert 4:2:0 planes to RGB"));
  // No pixels at all.
  status =
      FrameTensor(media::FrameBuffer::HostRgbFloat(nullptr, kSide, kSide, true), *model).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
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
