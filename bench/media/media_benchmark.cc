// Two tables for docs/media-benchmark.md (medians), from test videos made with the ffmpeg CLI into
// a temporary directory:
//
// 1. What sparse sampling saves: decode time of 16 uniformly sampled frames with keyframe seeking
//    and non-reference skipping, against decoding every frame up to the last one wanted, and
//    against decoding all frames. The variants take turns within each round on the same bytes.
// 2. All-frames throughput against the ffmpeg CLI, for each decoder thread count N: DecodeClip
//    keeping and converting every frame (on a thread of its own, the default, and on the
//    decoding thread, whose calls also give the time of decoding alone), `ffmpeg -threads N -i
//    FILE -f null -` on the same file, and the CLI doing the same resize, crop and RGB conversion
//    as ours (on one filter thread). The four take turns within each round. The CLI is
//    timed wall-clock from spawn to exit, so its figures include process start, which is measured
//    on a one-frame file and printed under the table.
// 3. The conversion alone: FrameConverter on frames of the first video decoded beforehand, resizing
//    only the region the crop shows (the default) against resizing the whole frame and cropping,
//    for both output layouts.
//
//   vidclf-media-bench [--seconds 60] [--rounds 5] [--threads 1,2] [--convert_frames 300]
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/median.h"
#include "media/av_util.h"
#include "media/clip_decoder.h"
#include "media/frame_converter.h"

ABSL_FLAG(int, seconds, 60, "Length of each test video, at 30 frames per second.");
ABSL_FLAG(int, rounds, 5, "Timed rounds; the median is reported.");
ABSL_FLAG(std::string, threads, "1,2", "Decoder thread counts of the all-frames comparison.");
ABSL_FLAG(int, convert_frames, 300, "Frames decoded into memory for timing the conversion alone.");

extern char** environ;

namespace {

using vidclf::bench::Median;
using vidclf::media::ClipOptions;
using vidclf::media::DecodeClip;
using vidclf::media::DecodedClip;
using vidclf::media::FrameConverter;
using vidclf::media::FramePtr;
using vidclf::media::SamplingStrategy;
using vidclf::media::VideoSource;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Video {
  std::string label;
  std::string file;
  std::string codec;
};

struct Variant {
  std::string label;
  ClipOptions options;
  std::vector<double> seconds;
  int64_t frames_decoded = 0;
};

// The conversion of the all-frames comparison, for both sides.
constexpr int kResizeShorterSide = 128;
constexpr int kCropSize = 112;

// `ffmpeg -threads N -i FILE -f null -`, decoding every frame and discarding it; with a non-empty
// `filter`, each frame goes through that filter graph (on one thread) first.
std::vector<std::string> FfmpegDecodeCommand(const std::string& path, int threads,
                                             const std::string& filter) {
  std::vector<std::string> args = {
      "ffmpeg",   "-hide_banner",         "-nostdin", "-loglevel", "error",
      "-threads", std::to_string(threads)};
  if (!filter.empty()) args.insert(args.end(), {"-filter_threads", "1"});
  args.insert(args.end(), {"-i", path});
  if (!filter.empty()) args.insert(args.end(), {"-vf", filter});
  args.insert(args.end(), {"-f", "null", "-"});
  return args;
}

// Wall-clock seconds of running `args` (args[0] looked up in PATH), from spawn to exit; -1 if it
// fails. Spawned without a shell, so only the program's own start is counted.
double TimeCommand(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const auto start = Clock::now();
  pid_t pid = 0;
  if (posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return SecondsSince(start);
}

// The first `max_frames` frames of the video at `path`, decoded on one thread; empty on failure.
std::vector<FramePtr> DecodeFrames(const std::string& path, int max_frames) {
  std::vector<FramePtr> frames;
  AVFormatContext* format = nullptr;
  if (avformat_open_input(&format, path.c_str(), nullptr, nullptr) < 0) return frames;
  vidclf::media::CodecContextPtr decoder;
  const AVCodec* codec = nullptr;
  const int stream = avformat_find_stream_info(format, nullptr) < 0
                         ? -1
                         : av_find_best_stream(format, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
  if (stream >= 0) decoder.reset(avcodec_alloc_context3(codec));
  if (!decoder ||
      avcodec_parameters_to_context(decoder.get(), format->streams[stream]->codecpar) < 0 ||
      avcodec_open2(decoder.get(), codec, nullptr) < 0) {
    avformat_close_input(&format);
    return frames;
  }
  vidclf::media::PacketPtr packet(av_packet_alloc());
  auto receive = [&] {
    for (FramePtr frame(av_frame_alloc()); static_cast<int>(frames.size()) < max_frames &&
                                           avcodec_receive_frame(decoder.get(), frame.get()) >= 0;
         frame.reset(av_frame_alloc())) {
      frames.push_back(std::move(frame));
    }
  };
  while (static_cast<int>(frames.size()) < max_frames && av_read_frame(format, packet.get()) >= 0) {
    if (packet->stream_index == stream) avcodec_send_packet(decoder.get(), packet.get());
    av_packet_unref(packet.get());
    receive();
  }
  avcodec_send_packet(decoder.get(), nullptr);
  receive();
  avformat_close_input(&format);
  return frames;
}

// One row of the all-frames table: every side at one decoder thread count.
struct AllFramesRow {
  int threads = 1;
  std::vector<double> ffmpeg_seconds;
  std::vector<double> ffmpeg_converting_seconds;
  std::vector<double> ours_seconds;
  std::vector<double> ours_inline_seconds;  // converting on the decoding thread
  std::vector<double> ours_decode_seconds;  // the same calls less their conversion time
};

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::vector<int> thread_counts;
  for (absl::string_view field : absl::StrSplit(absl::GetFlag(FLAGS_threads), ',')) {
    int threads = 0;
    if (!absl::SimpleAtoi(field, &threads) || threads < 1) {
      std::cerr << "--threads wants positive integers separated by commas\n";
      return 1;
    }
    thread_counts.push_back(threads);
  }
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("vidclf-media-bench-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const int frames = 30 * absl::GetFlag(FLAGS_seconds);
  const std::vector<Video> videos = {
      {"H.264 MP4, keyframe every 250 frames (x264's default)", "h264-g250.mp4", "-c:v libx264"},
      {"H.264 MP4, keyframe every 30 frames", "h264-g30.mp4", "-c:v libx264 -g 30"},
      {"H.264 Matroska, keyframe every 30 frames", "h264-g30.mkv", "-c:v libx264 -g 30"},
      {"VP9 WebM, keyframe every 30 frames", "vp9-g30.webm",
       "-c:v libvpx-vp9 -deadline realtime -cpu-used 8 -g 30"},
  };
  std::cout << "| video (" << absl::GetFlag(FLAGS_seconds) << " s, 640×360, 30 fps, " << frames
            << " frames) | variant | frames decoded | ms (median) | time vs decode through |\n"
            << "|---|---|---|---|---|\n";
  std::vector<std::string> contents;  // each video's bytes, kept for the second table
  for (const Video& video : videos) {
    const std::string path = (dir / video.file).string();
    const std::string command =
        "ffmpeg -nostdin -v error -y -f lavfi -i testsrc2=size=640x360:rate=30 "
        "-frames:v " +
        std::to_string(frames) + " " + video.codec + " '" + path + "'";
    if (std::system(command.c_str()) != 0) {
      std::cerr << "cannot make " << path << "\n";
      return 1;
    }
    std::ifstream file(path, std::ios::binary);
    std::stringstream bytes;
    bytes << file.rdbuf();
    contents.push_back(bytes.str());
    const std::string& data = contents.back();

    std::vector<Variant> variants(3);
    for (Variant& variant : variants) {
      variant.options.preprocess.resize_shorter_side = 128;
      variant.options.preprocess.crop_size = 112;
      variant.options.decoder_threads = 1;
    }
    variants[0].label = "16 uniform frames, seek + skip";
    variants[1].label = "16 uniform frames, decode through";
    variants[1].options.seek_to_keyframes = false;
    variants[1].options.skip_unwanted_non_reference_frames = false;
    variants[2].label = "every frame";
    variants[2].options.sampling.num_frames = 0;
    for (int round = 0; round < absl::GetFlag(FLAGS_rounds); ++round) {
      for (Variant& variant : variants) {
        const auto start = std::chrono::steady_clock::now();
        absl::StatusOr<DecodedClip> clip = DecodeClip(VideoSource::Bytes(data), variant.options);
        variant.seconds.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        if (!clip.ok()) {
          std::cerr << video.file << ": " << clip.status() << "\n";
          return 1;
        }
        variant.frames_decoded = clip->frames_decoded;
      }
    }
    const double through = Median(variants[1].seconds);
    for (const Variant& variant : variants) {
      const double median = Median(variant.seconds);
      std::cout << "| " << video.label << " | " << variant.label << " | " << variant.frames_decoded
                << " | " << std::fixed << std::setprecision(0) << median * 1e3 << " | "
                << std::setprecision(2) << median / through << " |\n";
    }
  }

  const std::string convert_filter = "scale=-2:" + std::to_string(kResizeShorterSide) +
                                     ":flags=bilinear,crop=" + std::to_string(kCropSize) + ":" +
                                     std::to_string(kCropSize) + ",format=rgb24";
  std::cout << "\n| video | decoder threads | ffmpeg -f null (frames/s) | ours (frames/s) | "
               "ours vs ffmpeg | ours, converting on the decoding thread (frames/s) | that vs "
               "ffmpeg | its decoding part (frames/s) | decoding vs ffmpeg | ffmpeg, same "
               "conversion (frames/s) | ours vs that |\n"
            << "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (size_t v = 0; v < videos.size(); ++v) {
    const std::string path = (dir / videos[v].file).string();
    std::vector<AllFramesRow> rows;
    for (int threads : thread_counts) {
      rows.emplace_back();
      rows.back().threads = threads;
    }
    for (int round = 0; round < absl::GetFlag(FLAGS_rounds); ++round) {
      for (AllFramesRow& row : rows) {
        // Rotate which side goes first, so that none always finds the caches warmer.
        for (int turn = 0; turn < 4; ++turn) {
          const int side = (turn + round) % 4;
          if (side < 2) {
            const double seconds = TimeCommand(
                FfmpegDecodeCommand(path, row.threads, side == 0 ? "" : convert_filter));
            if (seconds < 0) {
              std::cerr << "ffmpeg failed on " << path << "\n";
              return 1;
            }
            (side == 0 ? row.ffmpeg_seconds : row.ffmpeg_converting_seconds).push_back(seconds);
            continue;
          }
          ClipOptions options;
          options.sampling.strategy = SamplingStrategy::kAll;
          options.sampling.num_frames = 0;
          options.preprocess.resize_shorter_side = kResizeShorterSide;
          options.preprocess.crop_size = kCropSize;
          options.decoder_threads = row.threads;
          options.convert_while_decoding = side == 2;
          const auto start = Clock::now();
          absl::StatusOr<DecodedClip> clip = DecodeClip(VideoSource::Bytes(contents[v]), options);
          const double seconds = SecondsSince(start);
          if (!clip.ok()) {
            std::cerr << videos[v].file << ": " << clip.status() << "\n";
            return 1;
          }
          if (clip->num_frames != frames) {
            std::cerr << videos[v].file << ": kept " << clip->num_frames << " of " << frames
                      << " frames\n";
            return 1;
          }
          if (side == 2) {
            row.ours_seconds.push_back(seconds);
          } else {
            row.ours_inline_seconds.push_back(seconds);
            row.ours_decode_seconds.push_back(clip->decode_seconds);
          }
        }
      }
    }
    for (const AllFramesRow& row : rows) {
      const double ffmpeg = frames / Median(row.ffmpeg_seconds);
      const double converting = frames / Median(row.ffmpeg_converting_seconds);
      const double ours = frames / Median(row.ours_seconds);
      const double inline_conversion = frames / Median(row.ours_inline_seconds);
      const double decoding = frames / Median(row.ours_decode_seconds);
      std::cout << "| " << videos[v].label << " | " << row.threads << std::fixed << " | "
                << std::setprecision(0) << ffmpeg << " | " << ours << " | " << std::setprecision(2)
                << ours / ffmpeg << " | " << std::setprecision(0) << inline_conversion << " | "
                << std::setprecision(2) << inline_conversion / ffmpeg << " | "
                << std::setprecision(0) << decoding << " | " << std::setprecision(2)
                << decoding / ffmpeg << " | " << std::setprecision(0) << converting << " | "
                << std::setprecision(2) << ours / converting << " |\n";
    }
  }

  // The conversion alone, on frames of the first video already in memory. Each converter writes
  // into memory as large as a clip's, touched beforehand, as DecodeClip's output is.
  const std::vector<FramePtr> decoded =
      DecodeFrames((dir / videos[0].file).string(), absl::GetFlag(FLAGS_convert_frames));
  if (decoded.empty()) {
    std::cerr << "cannot decode " << videos[0].file << "\n";
    return 1;
  }
  struct ConvertVariant {
    std::string label;
    bool whole_frame;
    bool channels_last;
    std::vector<double> seconds;
  };
  std::vector<ConvertVariant> converts = {
      {"resize the whole frame, then crop", true, false, {}},
      {"resize only the region the crop shows (default)", false, false, {}},
      {"resize the whole frame, then crop; channels last", true, true, {}},
      {"resize only the region the crop shows; channels last", false, true, {}},
  };
  vidclf::media::PreprocessOptions preprocess;
  preprocess.resize_shorter_side = kResizeShorterSide;
  preprocess.crop_size = kCropSize;
  std::vector<float> pixels(FrameConverter(preprocess).output_floats() * decoded.size(), 0.0f);
  for (int round = 0; round < absl::GetFlag(FLAGS_rounds); ++round) {
    for (ConvertVariant& variant : converts) {
      preprocess.channels_last = variant.channels_last;
      FrameConverter converter(preprocess);
      converter.set_whole_frame_resize(variant.whole_frame);
      const auto start = Clock::now();
      for (size_t i = 0; i < decoded.size(); ++i) {
        if (!converter.Convert(*decoded[i], pixels.data() + i * converter.output_floats()).ok()) {
          std::cerr << "conversion failed\n";
          return 1;
        }
      }
      variant.seconds.push_back(SecondsSince(start));
    }
  }
  std::cout << "\n| conversion of " << decoded.size() << " frames of " << videos[0].label << " to "
            << kCropSize << "×" << kCropSize << " | µs per frame (median) |\n"
            << "|---|---|\n";
  for (const ConvertVariant& variant : converts) {
    std::cout << "| " << variant.label << " | " << std::setprecision(0)
              << Median(variant.seconds) * 1e6 / decoded.size() << " |\n";
  }

  // What process start, probing and one frame cost the CLI, to read its figures above by.
  const std::string one_frame = (dir / "one-frame.mp4").string();
  const std::string command =
      "ffmpeg -nostdin -v error -y -f lavfi -i testsrc2=size=640x360:rate=30 -frames:v 1 "
      "-c:v libx264 '" +
      one_frame + "'";
  if (std::system(command.c_str()) != 0) {
    std::cerr << "cannot make " << one_frame << "\n";
    return 1;
  }
  std::vector<double> start_seconds;
  for (int round = 0; round < absl::GetFlag(FLAGS_rounds); ++round) {
    start_seconds.push_back(TimeCommand(FfmpegDecodeCommand(one_frame, 1, "")));
    if (start_seconds.back() < 0) {
      std::cerr << "ffmpeg failed on " << one_frame << "\n";
      return 1;
    }
  }
  std::cout << "\n`ffmpeg -threads 1 -i FILE -f null -` on a one-frame H.264 file: "
            << std::setprecision(0) << Median(start_seconds) * 1e3 << " ms (median).\n";
  std::filesystem::remove_all(dir);
  return 0;
}
