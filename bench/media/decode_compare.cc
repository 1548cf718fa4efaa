// How far the frames a clip decoder gives on a GPU's NVDEC are from the CPU's: each file decoded
// by media::DecodeClip with the same options on the CPU and with --decode_device, and the
// converted frames compared in 8-bit levels (the difference of normalised values times 255 times
// the channel's std). On the GPU the decoders come from a media::DecoderPool, as the server's do:
// over --rounds rounds of every file, the later ones decode with decoders kept from earlier
// files. One JSON line per file and round.
//
//   vidclf-decode-compare --decode_device cuda:0 [--frames 16] [--crop 224] [--rounds 2] FILE...
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "media/clip_decoder.h"
#include "media/decoder_pool.h"
#include "media/nvdec_device.h"

ABSL_FLAG(std::string, decode_device, "cuda:0", "cuda:N: the GPU whose NVDEC is compared.");
ABSL_FLAG(int, frames, 16, "Frames sampled uniformly from each file.");
ABSL_FLAG(int, crop, 224, "Crop size (the shorter side is resized to 8/7 of it).");
ABSL_FLAG(int, rounds, 2, "Rounds over the files, with the GPU's decoders kept between clips.");

int main(int argc, char** argv) {
  std::vector<char*> files = absl::ParseCommandLine(argc, argv);
  files.erase(files.begin());
  auto nvdec = vidclf::media::NvdecDevice::Open(absl::GetFlag(FLAGS_decode_device),
                                                /*max_sessions=*/4);
  if (!nvdec.ok()) {
    std::cerr << "vidclf-decode-compare: " << nvdec.status() << "\n";
    return 1;
  }
  vidclf::media::ClipOptions options;
  options.sampling.num_frames = absl::GetFlag(FLAGS_frames);
  options.preprocess.crop_size = absl::GetFlag(FLAGS_crop);
  options.preprocess.resize_shorter_side = options.preprocess.crop_size * 8 / 7;
  vidclf::media::DecoderPool pool(/*max_idle=*/static_cast<int>(files.size()));
  vidclf::media::ClipOptions on_gpu_options = options;
  on_gpu_options.nvdec = nvdec->get();
  on_gpu_options.decoder_pool = &pool;
  for (int round = 0; round < absl::GetFlag(FLAGS_rounds); ++round) {
    for (const char* file : files) {
      std::ifstream input(file, std::ios::binary);
      std::ostringstream bytes;
      bytes << input.rdbuf();
      const std::string video = bytes.str();
      const auto source = vidclf::media::VideoSource::Bytes(video);
      nlohmann::json line = {{"file", file}, {"round", round}};
      auto on_cpu = vidclf::media::DecodeClip(source, options);
      const int64_t reuses = pool.reuses();
      auto on_gpu = vidclf::media::DecodeClip(source, on_gpu_options);
      line["reused_decoder"] = pool.reuses() > reuses;
      if (!on_cpu.ok() || !on_gpu.ok()) {
        line["error"] = (on_cpu.ok() ? on_gpu.status() : on_cpu.status()).ToString();
        std::cout << line.dump() << std::endl;
        continue;
      }
      line["decoded_on"] = on_gpu->decoded_on;
      line["gpu_fallback"] = on_gpu->gpu_fallback;
      line["frames_decoded_on_gpu"] = on_gpu->frames_decoded_on_gpu;
      line["seeks"] = {{"cpu", on_cpu->seeks}, {"gpu", on_gpu->seeks}};
      line["same_frames"] = on_cpu->frame_indices == on_gpu->frame_indices;
      if (on_cpu->pixels.size() == on_gpu->pixels.size() && !on_cpu->pixels.empty()) {
        const int64_t plane = static_cast<int64_t>(on_cpu->crop_size) * on_cpu->crop_size;
        double largest = 0, total = 0;
        for (size_t i = 0; i < on_cpu->pixels.size(); ++i) {
          const float std = options.preprocess.std[(i / plane) % 3];
          const double levels = std::abs(on_cpu->pixels[i] - on_gpu->pixels[i]) * std * 255;
          largest = std::max(largest, levels);
          total += levels;
        }
        line["max_levels"] = largest;
        line["mean_levels"] = total / static_cast<double>(on_cpu->pixels.size());
      }
      std::cout << line.dump() << std::endl;
    }
  }
  return 0;
}
