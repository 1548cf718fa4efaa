// How many frames a second libavcodec decodes, on the CPU or on a GPU's NVDEC, with decoders side
// by side: every frame of each file decoded and dropped, as `ffmpeg -hwaccel cuda
// -hwaccel_output_format cuda -i FILE -f null -` (or `ffmpeg -threads N -i FILE -f null -`) does,
// through media::OpenVideoDecoder, the decoders' own opening. It measures the decoder, not vidclf:
// the ceiling that the server's figures are read against (docs/gpu-serving-benchmark.md).
//
// One JSON line per file and number of decoders side by side.
//
//   vidclf-decode-rate [--decode_device cpu|cuda:N] [--threads 0] [--parallel 1,4] [--rounds 3]
//                      FILE...
#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/list_flag.h"
#include "bench/median.h"
#include "media/av_util.h"
#include "media/nvdec_device.h"
#include "media/video_stream.h"

ABSL_FLAG(std::string, decode_device, "cpu", "cpu, or cuda:N for that GPU's NVDEC.");
ABSL_FLAG(int, threads, 0, "Threads of each decoder; 0: libavcodec's choice (NVDEC: at most 4).");
ABSL_FLAG(std::string, parallel, "1", "Numbers of decoders side by side, comma-separated.");
ABSL_FLAG(int, rounds, 3, "Timed rounds; the median is reported.");

namespace {

using vidclf::media::NvdecDevice;

struct Decoded {
  int64_t frames = 0;
  int64_t on_gpu = 0;
  std::string error;
};

// Decodes every frame of `path` once.
Decoded DecodeAll(const std::string& path, const NvdecDevice* nvdec, int threads) {
  Decoded decoded;
  AVFormatContext* format = nullptr;
  if (avformat_open_input(&format, path.c_str(), nullptr, nullptr) < 0) {
    decoded.error = "cannot open " + path;
    return decoded;
  }
  const std::unique_ptr<AVFormatContext, void (*)(AVFormatContext*)> close(
      format, [](AVFormatContext* opened) { avformat_close_input(&opened); });
  auto stream = vidclf::media::FindVideoStream(format, 8192);
  if (!stream.ok()) {
    decoded.error = stream.status().ToString();
    return decoded;
  }
  auto decoder = vidclf::media::OpenVideoDecoder(*format->streams[stream->index], stream->codec,
                                                 threads, 8192, nvdec);
  if (!decoder.ok()) {
    decoded.error = decoder.status().ToString();
    return decoded;
  }
  vidclf::media::PacketPtr packet(av_packet_alloc());
  vidclf::media::FramePtr frame(av_frame_alloc());
  const auto drain = [&] {
    while (avcodec_receive_frame(decoder->get(), frame.get()) >= 0) {
      ++decoded.frames;
      if (frame->hw_frames_ctx != nullptr) ++decoded.on_gpu;
      av_frame_unref(frame.get());
    }
  };
  while (av_read_frame(format, packet.get()) >= 0) {
    if (packet->stream_index == stream->index) avcodec_send_packet(decoder->get(), packet.get());
    av_packet_unref(packet.get());
    drain();
  }
  avcodec_send_packet(decoder->get(), nullptr);
  drain();
  return decoded;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> files = absl::ParseCommandLine(argc, argv);
  files.erase(files.begin());
  av_log_set_level(AV_LOG_ERROR);
  std::unique_ptr<NvdecDevice> nvdec;
  const std::string device = absl::GetFlag(FLAGS_decode_device);
  if (device != "cpu") {
    auto opened = NvdecDevice::Open(device, /*max_sessions=*/256);
    if (!opened.ok()) {
      std::cerr << "vidclf-decode-rate: " << opened.status() << "\n";
      return 1;
    }
    nvdec = *std::move(opened);
  }
  const std::vector<int64_t> parallels = vidclf::bench::ParseList(absl::GetFlag(FLAGS_parallel));
  for (const char* file : files) {
    for (const int64_t parallel : parallels) {
      std::vector<double> rates;
      Decoded last;
      for (int round = 0; round < absl::GetFlag(FLAGS_rounds); ++round) {
        std::vector<Decoded> results(parallel);
        const auto start = std::chrono::steady_clock::now();
        std::vector<std::thread> decoders;
        for (int i = 0; i < parallel; ++i) {
          decoders.emplace_back(
              [&, i] { results[i] = DecodeAll(file, nvdec.get(), absl::GetFlag(FLAGS_threads)); });
        }
        for (std::thread& decoder : decoders) decoder.join();
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        int64_t frames = 0;
        for (const Decoded& result : results) frames += result.frames;
        rates.push_back(static_cast<double>(frames) / seconds);
        last = results.front();
      }
      nlohmann::json line = {{"file", file},
                             {"decode_device", device},
                             {"parallel", parallel},
                             {"frames_per_decoder", last.frames},
                             {"frames_on_gpu", last.on_gpu},
                             {"frames_per_second", vidclf::bench::Median(rates)}};
      if (!last.error.empty()) line["error"] = last.error;
      std::cout << line.dump() << std::endl;
    }
  }
  return 0;
}
