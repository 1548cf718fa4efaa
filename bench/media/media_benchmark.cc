// What sparse sampling saves: decode time of 16 uniformly sampled frames with keyframe seeking and
// non-reference skipping, against decoding every frame up to the last one wanted, and against
// decoding all frames. The variants take turns within each round on the same bytes. Test videos
// are made with the ffmpeg CLI into a temporary directory. Prints a Markdown table (medians) for
// docs/media-benchmark.md.
//
//   vidclf-media-bench [--seconds 60] [--rounds 5]
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
#include "bench/median.h"
#include "media/clip_decoder.h"

ABSL_FLAG(int, seconds, 60, "Length of each test video, at 30 frames per second.");
ABSL_FLAG(int, rounds, 5, "Timed rounds; the median is reported.");

namespace {

using vidclf::bench::Median;
using vidclf::media::ClipOptions;
using vidclf::media::DecodeClip;
using vidclf::media::DecodedClip;

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

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
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
    const std::string data = bytes.str();

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
        absl::StatusOr<DecodedClip> clip = DecodeClip(data, variant.options);
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
  std::filesystem::remove_all(dir);
  return 0;
}
