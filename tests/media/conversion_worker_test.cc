#include "media/conversion_worker.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace vidclf::media {
namespace {

PreprocessOptions SmallCrop() {
  PreprocessOptions options;
  options.resize_shorter_side = 24;
  options.crop_size = 16;
  return options;
}

// A 40x30 RGB24 frame whose pixels depend on `seed`, so that every frame converts differently.
FramePtr PatternFrame(int seed) {
  FramePtr frame(av_frame_alloc());
  frame->format = AV_PIX_FMT_RGB24;
  frame->width = 40;
  frame->height = 30;
  EXPECT_GE(av_frame_get_buffer(frame.get(), 0), 0);
  for (int y = 0; y < frame->height; ++y) {
    for (int x = 0; x < 3 * frame->width; ++x) {
      frame->data[0][y * frame->linesize[0] + x] = static_cast<uint8_t>(seed * 37 + x * 5 + y * 3);
    }
  }
  return frame;
}

TEST(ConversionWorker, ConvertsEachFrameIntoItsSlotAsTheConverterWould) {
  constexpr int kWorkerFrames = 12;
  FrameConverter reference(SmallCrop());
  const int64_t floats = reference.output_floats();
  std::vector<float> expected(kWorkerFrames * floats);
  for (int i = 0; i < kWorkerFrames; ++i) {
    ASSERT_TRUE(reference.Convert(*PatternFrame(i), expected.data() + i * floats).ok());
  }

  for (const bool own_thread : {true, false}) {
    FrameConverter converter(SmallCrop());
    std::vector<float> out(kWorkerFrames * floats);
    ConversionWorker worker(converter, own_thread);
    for (int i = 0; i < kWorkerFrames; ++i) {
      FramePtr frame = PatternFrame(i);
      ASSERT_TRUE(worker.Submit(*frame, out.data() + i * floats).ok());
      EXPECT_EQ(frame->data[0], nullptr) << "Submit takes the frame's buffers";
    }
    ASSERT_TRUE(worker.Finish().ok());
    EXPECT_EQ(out, expected) << "own thread: " << own_thread;
    EXPECT_GT(worker.converting_seconds(), 0);
    if (!own_thread) {
      EXPECT_GE(worker.waiting_seconds(), worker.converting_seconds());
    }
  }
}

// A GPU's picture, which its consumer converts, is handed on in turn with the converted frames.
TEST(ConversionWorker, HandsOnFramesWithNoOutputUnconvertedInTurn) {
  for (const bool own_thread : {true, false}) {
    FrameConverter converter(SmallCrop());
    std::vector<float> out(converter.output_floats(), -7.0f);
    std::vector<int> order;
    ConversionWorker worker(converter, own_thread);
    for (int i = 0; i < 4; ++i) {
      FramePtr frame = PatternFrame(i);
      float* into = i == 2 ? out.data() : nullptr;
      ASSERT_TRUE(worker
                      .Submit(*frame, into,
                              [&order, i] {
                                order.push_back(i);
                                return absl::OkStatus();
                              })
                      .ok());
    }
    ASSERT_TRUE(worker.Finish().ok());
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3})) << "own thread: " << own_thread;
    EXPECT_NE(out.front(), -7.0f) << "the frame with an output is converted";
  }
}

TEST(ConversionWorker, ReportsTheFirstErrorAndConvertsNothingAfterIt) {
  for (const bool own_thread : {true, false}) {
    FrameConverter converter(SmallCrop());
    const int64_t floats = converter.output_floats();
    std::vector<float> out(3 * floats, -100.0f);
    ConversionWorker worker(converter, own_thread);
    FramePtr good = PatternFrame(1);
    ASSERT_TRUE(worker.Submit(*good, out.data()).ok());
    FramePtr blank(av_frame_alloc());
    worker.Submit(*blank, out.data() + floats).IgnoreError();  // fails now or later
    const absl::Status finished = worker.Finish();
    EXPECT_EQ(finished.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(finished.message(), "decoded frame has no pixels");

    FramePtr late = PatternFrame(2);
    EXPECT_EQ(worker.Submit(*late, out.data() + 2 * floats).code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(worker.Finish().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(out[0], -100.0f) << "the frame before the error is converted";
    EXPECT_EQ(out[2 * floats], -100.0f) << "no frame after the error is";
  }
}

// Frames still waiting when the worker goes are freed without being converted (the sanitizer
// build checks that nothing leaks).
TEST(ConversionWorker, DropsTheWaitingFramesWhenDestroyedUnfinished) {
  FrameConverter converter(SmallCrop());
  const int64_t floats = converter.output_floats();
  std::vector<float> out(8 * floats);
  {
    ConversionWorker worker(converter, /*own_thread=*/true);
    for (int i = 0; i < 8; ++i) {
      FramePtr frame = PatternFrame(i);
      ASSERT_TRUE(worker.Submit(*frame, out.data() + i * floats).ok());
    }
  }
  SUCCEED();
}

}  // namespace
}  // namespace vidclf::media
