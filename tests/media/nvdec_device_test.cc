// Decoding on a GPU's NVDEC: where no GPU can decode, opening one fails with a message that says
// what is missing; where one can, its clips equal the CPU's (run in bench/gpu on a GPU machine).
#include "media/nvdec_device.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "media/clip_decoder.h"
#include "tests/test_util/test_files.h"

namespace vidclf::media {
namespace {

using ::testing::HasSubstr;

// Decoders on a GPU are freed on the device's own threads: waits until every session is back.
bool SessionsComeBack(const NvdecDevice& device) {
  for (int i = 0; i < 6000 && device.sessions_in_use() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return device.sessions_in_use() == 0;
}

TEST(NvdecDeviceTest, SaysWhatIsMissingWhereNoGpuDecodes) {
  auto device = NvdecDevice::Open(0, /*max_sessions=*/1);
  if (device.ok()) GTEST_SKIP() << "cuda:0 decodes on this machine";
  EXPECT_EQ(device.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(device.status().message()),
              HasSubstr("cannot open cuda:0 for decoding (it needs an NVIDIA GPU and the "
                        "driver's libcuda.so.1 and libnvcuvid.so.1)"));
}

TEST(NvdecDeviceTest, ReadsTheIndexOfACudaDeviceOnly) {
  EXPECT_EQ(CudaDeviceIndex("cuda:3").value(), 3);
  EXPECT_EQ(CudaDeviceIndex("cuda").value(), 0);
  for (const char* name : {"cpu", "cuda:", "cuda:-1", "cuda:x", "gpu0", ""}) {
    EXPECT_EQ(CudaDeviceIndex(name).status().code(), absl::StatusCode::kInvalidArgument) << name;
  }
}

TEST(NvdecDeviceTest, ExplainsEachFallback) {
  EXPECT_EQ(DescribeGpuFallback(kCodecFallback), "NVDEC has no decoder for the video's codec");
  EXPECT_EQ(DescribeGpuFallback(kSessionsFallback),
            "every NVDEC session this server allows was in use");
  EXPECT_EQ(DescribeGpuFallback(kCpuFasterChoice),
            "a lone call of H.264 at 720p or more decodes faster on the CPU's cores than on one "
            "NVDEC decoder");
  EXPECT_EQ(DescribeGpuFallback("unknown"), "unknown");
}

// A call alone decodes on the CPU only what its cores decode faster than one NVDEC decoder: H.264
// of 720p or more (either way up), not smaller H.264 or other codecs.
TEST(NvdecDeviceTest, ChoosesTheCpuForALoneCallOfLargeH264Only) {
  const auto stream = [](AVCodecID codec, int width, int height) {
    AVCodecParameters parameters{};
    parameters.codec_id = codec;
    parameters.width = width;
    parameters.height = height;
    return parameters;
  };
  EXPECT_TRUE(NvdecDevice::CpuDecodesFasterAlone(stream(AV_CODEC_ID_H264, 1280, 720)));
  EXPECT_TRUE(NvdecDevice::CpuDecodesFasterAlone(stream(AV_CODEC_ID_H264, 720, 1280)));
  EXPECT_TRUE(NvdecDevice::CpuDecodesFasterAlone(stream(AV_CODEC_ID_H264, 1920, 1080)));
  EXPECT_FALSE(NvdecDevice::CpuDecodesFasterAlone(stream(AV_CODEC_ID_H264, 640, 360)));
  EXPECT_FALSE(NvdecDevice::CpuDecodesFasterAlone(stream(AV_CODEC_ID_HEVC, 1920, 1080)));
  EXPECT_FALSE(NvdecDevice::CpuDecodesFasterAlone(stream(AV_CODEC_ID_AV1, 1920, 1080)));
}

// ClipOptions::cpu_when_faster: where a GPU decodes, a 720p H.264 clip decodes on the CPU and
// says why, a 320x240 one on NVDEC; without a device it changes nothing (no fallback: none was
// asked for).
TEST(NvdecDeviceTest, CpuWhenFasterDecodesLargeH264OnTheCpu) {
  const std::string large = testing::ReadFile(testing::CachedVideo(
      "-f lavfi -i testsrc2=size=1280x720:rate=10 -frames:v 10 -c:v libx264", ".mp4"));
  ClipOptions options;
  options.cpu_when_faster = true;
  auto alone = DecodeClip(VideoSource::Bytes(large), options);
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_EQ(alone->decoded_on, "cpu");
  EXPECT_EQ(alone->gpu_fallback, "");

  auto device = NvdecDevice::Open(0, /*max_sessions=*/4);
  if (!device.ok()) GTEST_SKIP() << device.status();
  options.nvdec = device->get();
  auto on_cpu = DecodeClip(VideoSource::Bytes(large), options);
  ASSERT_TRUE(on_cpu.ok()) << on_cpu.status();
  EXPECT_EQ(on_cpu->decoded_on, "cpu");
  EXPECT_EQ(on_cpu->gpu_fallback, kCpuFasterChoice);
  const std::string small = testing::ReadFile(testing::CachedVideo(
      "-f lavfi -i testsrc2=size=320x240:rate=10 -frames:v 20 -c:v libx264", ".mp4"));
  auto on_gpu = DecodeClip(VideoSource::Bytes(small), options);
  ASSERT_TRUE(on_gpu.ok()) << on_gpu.status();
  EXPECT_EQ(on_gpu->decoded_on, "cuda:0");
  EXPECT_TRUE(SessionsComeBack(**device));
}

// Without a device a clip decodes on the CPU and says so, with no fallback: none was asked for.
TEST(NvdecDeviceTest, AClipSaysWhereItWasDecoded) {
  const std::string video = testing::ReadFile(testing::CachedVideo(
      "-f lavfi -i testsrc2=size=320x240:rate=10 -frames:v 20 -c:v libx264", ".mp4"));
  auto clip = DecodeClip(VideoSource::Bytes(video), ClipOptions());
  ASSERT_TRUE(clip.ok()) << clip.status();
  EXPECT_EQ(clip->decoded_on, "cpu");
  EXPECT_EQ(clip->gpu_fallback, "");
  EXPECT_EQ(clip->frames_decoded_on_gpu, 0);
}

// H.264 decodes to the same pixels everywhere, and NVDEC's NV12 planes convert as the CPU's
// YUV 4:2:0 do. H.264 4:4:4, which the H100's and H200's NVDEC does not decode, falls back with
// its reason where NVDEC turns it down.
TEST(NvdecDeviceTest, GivesTheCpusFramesAndFallsBackOnWhatItCannotDecode) {
  auto device = NvdecDevice::Open(0, /*max_sessions=*/4);
  if (!device.ok()) GTEST_SKIP() << device.status();
  ClipOptions on_gpu;
  on_gpu.nvdec = device->get();
  const std::string video = testing::ReadFile(testing::CachedVideo(
      "-f lavfi -i testsrc2=size=640x360:rate=25 -frames:v 50 -c:v libx264 -pix_fmt yuv420p",
      ".mp4"));
  auto cpu = DecodeClip(VideoSource::Bytes(video), ClipOptions());
  auto gpu = DecodeClip(VideoSource::Bytes(video), on_gpu);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ(gpu->decoded_on, "cuda:0");
  EXPECT_GT(gpu->frames_decoded_on_gpu, 0);
  EXPECT_EQ(gpu->frame_indices, cpu->frame_indices);
  EXPECT_EQ(gpu->pixels, cpu->pixels);

  const std::string chroma444 = testing::ReadFile(testing::CachedVideo(
      "-f lavfi -i testsrc2=size=320x240:rate=10 -frames:v 20 -c:v libx264 -pix_fmt yuv444p",
      ".mp4"));
  auto fallback = DecodeClip(VideoSource::Bytes(chroma444), on_gpu);
  ASSERT_TRUE(fallback.ok()) << fallback.status();
  if (fallback->decoded_on == "cpu") {
    EXPECT_EQ(fallback->gpu_fallback, kFormatFallback);
  }
  EXPECT_TRUE(SessionsComeBack(**device));
}

// A flushed H.264 decoder on NVDEC sets its GPU decoder up anew, so sparse sampling there decodes
// through keyframes where the CPU seeks to them; the frames are the same.
TEST(NvdecDeviceTest, SeeksOnlyFarOnNvdecAndGivesTheSameFrames) {
  auto device = NvdecDevice::Open(0, /*max_sessions=*/4);
  if (!device.ok()) GTEST_SKIP() << device.status();
  const std::string video = testing::ReadFile(
      testing::CachedVideo("-f lavfi -i testsrc2=size=640x360:rate=25 -frames:v 250 -c:v libx264 "
                           "-g 25 -pix_fmt yuv420p",
                           ".mp4"));
  ClipOptions options;
  options.sampling.num_frames = 4;
  auto cpu = DecodeClip(VideoSource::Bytes(video), options);
  options.nvdec = device->get();
  auto gpu = DecodeClip(VideoSource::Bytes(video), options);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_GT(cpu->seeks, 0);
  EXPECT_EQ(gpu->seeks, 0);
  EXPECT_EQ(gpu->frame_indices, cpu->frame_indices);
  EXPECT_EQ(gpu->pixels, cpu->pixels);
  EXPECT_TRUE(SessionsComeBack(**device));
}

}  // namespace
}  // namespace vidclf::media
