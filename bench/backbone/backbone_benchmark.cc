// ResNet18 embedding throughput for each layout and precision the device supports, measured side
// by side: the variants take turns within every round, so drift on a shared machine hits them
// alike. Prints a Markdown table (median over rounds) for docs/backbone-benchmark.md.
//
//   vidclf-backbone-bench [--device auto] [--sizes 112,224] [--batch 16] [--rounds 7]
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "bench/median.h"
#include "model/video_model.h"

ABSL_FLAG(std::string, device, "auto", "auto, cpu or cuda:N.");
ABSL_FLAG(std::string, sizes, "112,224", "Square frame sizes (crop sizes) to measure.");
ABSL_FLAG(int, batch, 16, "Frames per backbone batch.");
ABSL_FLAG(int, rounds, 7, "Timed rounds (after one warm-up); the median is reported.");
ABSL_FLAG(int, threads, 0, "LibTorch intra-op threads (0: LibTorch's default).");

namespace {

using vidclf::bench::Median;
using vidclf::model::InferenceOptions;
using vidclf::model::VideoModel;

struct Variant {
  std::string name;
  InferenceOptions options;
  std::unique_ptr<VideoModel> model;
  std::vector<double> seconds;
};

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::cerr << vidclf::model::ConfigureTorchThreads(absl::GetFlag(FLAGS_threads)) << "\n";
  auto device = vidclf::model::ResolveDevice(absl::GetFlag(FLAGS_device));
  if (!device.ok()) {
    std::cerr << device.status() << "\n";
    return 1;
  }
  std::vector<std::string> precisions = {"fp32"};
  if (device->is_cuda()) precisions = {"fp32", "fp16", "bf16"};
  const int batch = absl::GetFlag(FLAGS_batch);

  std::cout << "| frame size | variant | ms per batch of " << batch
            << " (median) | frames/s | time vs fp32 NCHW |\n|---|---|---|---|---|\n";
  for (const absl::string_view size_text : absl::StrSplit(absl::GetFlag(FLAGS_sizes), ',')) {
    const int size = std::stoi(std::string(size_text));
    vidclf::model::ModelConfig config;
    config.name = "bench";
    config.version = "1";
    config.labels = {"a", "b"};
    config.input.crop_size = size;
    config.input.resize_shorter_side = size;
    std::vector<Variant> variants;
    for (const std::string& precision : precisions) {
      for (const bool channels_last : {false, true}) {
        Variant variant;
        variant.name = precision + (channels_last ? " channels-last" : " NCHW");
        variant.options.device = device->str();
        variant.options.precision = precision;
        variant.options.channels_last = channels_last;
        torch::manual_seed(1);  // the same weights for every variant
        auto model = VideoModel::Create(config, variant.options);
        if (!model.ok()) {
          std::cerr << variant.name << ": " << model.status() << "\n";
          return 1;
        }
        variant.model = *std::move(model);
        variants.push_back(std::move(variant));
      }
    }
    torch::manual_seed(2);
    const torch::Tensor frames = torch::randn({batch, 3, size, size}).to(*device);
    for (int round = 0; round <= absl::GetFlag(FLAGS_rounds); ++round) {
      for (Variant& variant : variants) {
        const auto start = std::chrono::steady_clock::now();
        auto embeddings = variant.model->Embed(frames, /*max_batch_frames=*/batch);
        if (!embeddings.ok()) {
          std::cerr << variant.name << ": " << embeddings.status() << "\n";
          return 1;
        }
        // Embed returns CPU tensors, so the device has finished when it returns.
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (round > 0) variant.seconds.push_back(seconds);  // round 0 warms up
      }
    }
    const double baseline = Median(variants.front().seconds);
    for (const Variant& variant : variants) {
      const double median = Median(variant.seconds);
      std::cout << "| " << size << "×" << size << " | " << variant.name << " | " << std::fixed
                << std::setprecision(1) << median * 1e3 << " | " << std::setprecision(0)
                << batch / median << " | " << std::setprecision(2) << median / baseline << " |\n";
    }
  }
  return 0;
}
