// How many frames a second libavcodec decodes, on the CPU or on a GPU's NVDEC, with decoders side
// by side: every frame of each file decoded and dropped, as `ffmpeg -hwaccel cuda
// -hwaccel_output_format cuda -i FILE -f null -` (or `ffmpeg -threads N -i FILE -f null -`) does,
// through media::OpenVideoDecoder, the decoders' own opening. It measures the decoder, not vidclf:
// the ceiling that the server's figures are read against (docs/gpu-serving-benchmark.md).
//
// One JSON line per file and number of decoders side by side, with what the first decoder's
// opening, first frame and closing took (medians over rounds): where a decoder's fixed cost lies.
// With --passes N each decoder decodes its file N times, rewound in between, as a decoder kept
// open between calls would: flushed, or with --keep_set_up its runs ended as media::DecoderPool's
// decoders end them (one thread, no flush); the first decoder's first pass (its opening
// included) and its later passes are timed apart.
//
//   vidclf-decode-rate [--decode_device cpu|cuda:N] [--threads 0] [--parallel 1,4] [--rounds 3]
//                      [--passes 1 [--keep_set_up]] FILE...
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
#include "media/decoder_feed.h"
#include "media/nvdec_device.h"
#include "media/video_stream.h"

ABSL_FLAG(std::string, decode_device, "cpu", "cpu, or cuda:N for that GPU's NVDEC.");
ABSL_FLAG(int, threads, 0, "Threads of each decoder; 0: libavcodec's choice (NVDEC: at most 4).");
ABSL_FLAG(std::string, parallel, "1", "Numbers of decoders side by side, comma-separated.");
ABSL_FLAG(int, rounds, 3, "Timed rounds; the median is reported.");
ABSL_FLAG(int, passes, 1, "Times each decoder decodes its file, rewound in between.");
ABSL_FLAG(bool, keep_set_up, false,
          "End each pass as a decoder kept between calls does (one thread, never flushed).");

namespace {

using vidclf::media::NvdecDevice;

using Clock = std::chrono::steady_clock;

double MillisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

struct Decoded {
  int64_t frames = 0;
  int64_t on_gpu = 0;
  double open_ms = 0;           // OpenVideoDecoder
  double first_frame_ms = 0;    // from the decoder's opening to its first frame
  double close_ms = 0;          // freeing the decoder
  std::vector<double> pass_ms;  // each pass over the file; the first one includes the opening
  std::string error;
};

// Decodes every frame of `path` `passes` times with one decoder.
Decoded DecodeAll(const std::string& path, const NvdecDevice* nvdec, int threads, int passes,
                  bool keep_set_up) {
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
  const Clock::time_point opening = Clock::now();
  const AVStream& video = *format->streams[stream->index];
  auto decoder =
      vidclf::media::OpenVideoDecoder(video, stream->codec, keep_set_up ? 1 : threads, 8192, nvdec);
  decoded.open_ms = MillisecondsSince(opening);
  if (!decoder.ok()) {
    decoded.error = decoder.status().ToString();
    return decoded;
  }
  decoder->keep_set_up = keep_set_up;
  vidclf::media::DecoderFeed feed(*decoder, video);
  vidclf::media::PacketPtr packet(av_packet_alloc());
  vidclf::media::FramePtr frame(av_frame_alloc());
  const auto drain = [&] {
    while (avcodec_receive_frame(decoder->get(), frame.get()) >= 0) {
      if (!vidclf::media::DecoderFeed::IsFiller(*frame)) {
        if (decoded.frames++ == 0) decoded.first_frame_ms = MillisecondsSince(opening);
        if (frame->hw_frames_ctx != nullptr) ++decoded.on_gpu;
      }
      av_frame_unref(frame.get());
    }
    return absl::OkStatus();
  };
  Clock::time_point pass_start = opening;
  for (int pass = 0; pass < passes; ++pass) {
    if (pass > 0) {
      pass_start = Clock::now();
      av_seek_frame(format, stream->index, 0, AVSEEK_FLAG_BACKWARD);
    }
    while (av_read_frame(format, packet.get()) >= 0) {
      if (packet->stream_index == stream->index) feed.Send(packet.get());
      av_packet_unref(packet.get());
      drain().IgnoreError();
    }
    feed.EndRun(vidclf::media::DecoderFeed::HeldFrames::kWanted, drain).IgnoreError();
    decoded.pass_ms.push_back(MillisecondsSince(pass_start));
  }
  const Clock::time_point closing = Clock::now();
  decoder->context.reset();
  decoded.close_ms = MillisecondsSince(closing);
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
      std::vector<double> rates, open_ms, first_frame_ms, close_ms, first_pass_ms, later_pass_ms;
      Decoded last;
      for (int round = 0; round < absl::GetFlag(FLAGS_rounds); ++round) {
        std::vector<Decoded> results(parallel);
        const auto start = Clock::now();
        std::vector<std::thread> decoders;
        for (int i = 0; i < parallel; ++i) {
          decoders.emplace_back([&, i] {
            results[i] = DecodeAll(file, nvdec.get(), absl::GetFlag(FLAGS_threads),
                                   absl::GetFlag(FLAGS_passes), absl::GetFlag(FLAGS_keep_set_up));
          });
        }
        for (std::thread& decoder : decoders) decoder.join();
        const double seconds = MillisecondsSince(start) / 1000;
        int64_t frames = 0;
        for (const Decoded& result : results) frames += result.frames;
        rates.push_back(static_cast<double>(frames) / seconds);
        last = results.front();
        open_ms.push_back(last.open_ms);
        first_frame_ms.push_back(last.first_frame_ms);
        close_ms.push_back(last.close_ms);
        if (!last.pass_ms.empty()) first_pass_ms.push_back(last.pass_ms.front());
        for (size_t pass = 1; pass < last.pass_ms.size(); ++pass) {
          later_pass_ms.push_back(last.pass_ms[pass]);
        }
      }
      nlohmann::json line = {{"file", file},
                             {"decode_device", device},
                             {"parallel", parallel},
                             {"passes", absl::GetFlag(FLAGS_passes)},
                             {"keep_set_up", absl::GetFlag(FLAGS_keep_set_up)},
                             {"frames_per_decoder", last.frames},
                             {"frames_on_gpu", last.on_gpu},
                             {"frames_per_second", vidclf::bench::Median(rates)},
                             {"open_ms", vidclf::bench::Median(open_ms)},
                             {"first_frame_ms", vidclf::bench::Median(first_frame_ms)},
                             {"close_ms", vidclf::bench::Median(close_ms)}};
      if (!first_pass_ms.empty()) line["first_pass_ms"] = vidclf::bench::Median(first_pass_ms);
      if (!later_pass_ms.empty()) line["later_pass_ms"] = vidclf::bench::Median(later_pass_ms);
      if (!last.error.empty()) line["error"] = last.error;
      std::cout << line.dump() << std::endl;
    }
  }
  return 0;
}
