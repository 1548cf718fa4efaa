// How far the frames a clip decoder gives on a GPU's NVDEC are from the CPU's: each file decoded
// by media::DecodeClip with the same options on the CPU and twice with --decode_device, NVDEC's
// frames converted on the host by libswscale, then handed over as NVDEC's pictures and converted
// on the GPU by tensors (pipeline::FrameTensor), as the server does. The frames are compared in
// 8-bit levels (the difference of normalised values times 255 times the channel's std). On the
// GPU the decoders come from a media::DecoderPool, as the server's do: over --rounds rounds of
// every file, the later ones decode with decoders kept from earlier files. One JSON line per file
// and round.
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
#include "pipeline/frame_tensor.h"

ABSL_FLAG(std::string, decode_device, "cuda:0", "cuda:N: the GPU whose NVDEC is compared.");
ABSL_FLAG(int, frames, 16, "Frames sampled uniformly from each file.");
ABSL_FLAG(int, crop, 224, "Crop size (the shorter side is resized to 8/7 of it).");
ABSL_FLAG(int, rounds, 2, "Rounds over the files, with the GPU's decoders kept between clips.");

namespace {

// Keeps a clip's frames as the backbone's side takes them, on the host, counting those that came
// as a GPU's pictures.
class TensorSink : public vidclf::media::FrameSink {
 public:
  explicit TensorSink(const vidclf::media::PreprocessOptions& preprocess)
      : preprocess_(preprocess) {}

  void StartPass(int64_t frames) override {
    frames_.assign(frames, torch::Tensor());
    gpu_pictures_ = 0;
  }
  absl::Status Frame(int64_t slot, const vidclf::media::FrameBuffer& frame,
                     double /*timestamp_seconds*/) override {
    absl::StatusOr<torch::Tensor> tensor = vidclf::pipeline::FrameTensor(frame, preprocess_);
    if (!tensor.ok()) return tensor.status();
    if (frame.memory == vidclf::media::MemoryKind::kDevice) ++gpu_pictures_;
    if (slot >= static_cast<int64_t>(frames_.size())) frames_.resize(slot + 1);
    frames_[slot] = tensor->cpu();
    return absl::OkStatus();
  }

  const std::vector<torch::Tensor>& frames() const { return frames_; }
  int64_t gpu_pictures() const { return gpu_pictures_; }

 private:
  const vidclf::media::PreprocessOptions preprocess_;
  std::vector<torch::Tensor> frames_;
  int64_t gpu_pictures_ = 0;
};

// The largest and mean difference of `frames` ([T, 3, crop, crop] floats) from `reference`, in
// 8-bit levels.
nlohmann::json Levels(const float* frames, const float* reference, size_t floats, int64_t plane,
                      const vidclf::media::PreprocessOptions& preprocess) {
  double largest = 0, total = 0;
  for (size_t i = 0; i < floats; ++i) {
    const float std = preprocess.std[(i / plane) % 3];
    const double levels = std::abs(reference[i] - frames[i]) * std * 255;
    largest = std::max(largest, levels);
    total += levels;
  }
  return {{"max", largest}, {"mean", total / static_cast<double>(floats)}};
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> files = absl::ParseCommandLine(argc, argv);
  files.erase(files.begin());
  // A session for each file's kept decoder and for the clip being decoded.
  auto nvdec = vidclf::media::NvdecDevice::Open(absl::GetFlag(FLAGS_decode_device),
                                                static_cast<int>(files.size()) + 2);
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
      TensorSink sink(options.preprocess);
      vidclf::media::ClipOptions pictures_options = on_gpu_options;
      pictures_options.frame_sink = &sink;
      pictures_options.hand_over_gpu_pictures = true;
      auto pictures = vidclf::media::DecodeClip(source, pictures_options);
      if (!on_cpu.ok() || !on_gpu.ok() || !pictures.ok()) {
        line["error"] = (!on_cpu.ok()   ? on_cpu.status()
                         : !on_gpu.ok() ? on_gpu.status()
                                        : pictures.status())
                            .ToString();
        std::cout << line.dump() << std::endl;
        continue;
      }
      line["decoded_on"] = on_gpu->decoded_on;
      line["gpu_fallback"] = on_gpu->gpu_fallback;
      line["frames_decoded_on_gpu"] = on_gpu->frames_decoded_on_gpu;
      line["seeks"] = {{"cpu", on_cpu->seeks}, {"gpu", on_gpu->seeks}};
      line["same_frames"] = on_cpu->frame_indices == on_gpu->frame_indices;
      const int64_t plane = static_cast<int64_t>(on_cpu->crop_size) * on_cpu->crop_size;
      if (on_cpu->pixels.size() == on_gpu->pixels.size() && !on_cpu->pixels.empty()) {
        const nlohmann::json levels = Levels(on_gpu->pixels.data(), on_cpu->pixels.data(),
                                             on_cpu->pixels.size(), plane, options.preprocess);
        line["max_levels"] = levels["max"];
        line["mean_levels"] = levels["mean"];
      }
      line["gpu_pictures"] = sink.gpu_pictures();
      const torch::Tensor converted = torch::stack(sink.frames()).contiguous();
      if (static_cast<size_t>(converted.numel()) == on_cpu->pixels.size()) {
        line["gpu_pictures_levels"] = Levels(converted.data_ptr<float>(), on_cpu->pixels.data(),
                                             on_cpu->pixels.size(), plane, options.preprocess);
      }
      std::cout << line.dump() << std::endl;
    }
  }
  return 0;
}
