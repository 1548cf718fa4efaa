// ResNet18 embedding throughput for each layout and precision the device supports, eager and
// fused (model/fused_resnet18.h), against the device's own matrix-multiply peak in the same
// precision: a square matrix product takes its turn with the variants within every round, so
// drift on a shared machine hits them alike. Prints a Markdown table (median over rounds) for
// docs/backbone-benchmark.md and docs/gpu-benchmark.md.
//
//   vidclf-backbone-bench [--device auto] [--sizes 112,224] [--batches 16] [--rounds 7]
//                         [--cudnn_benchmark]
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#ifdef VIDCLF_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "bench/list_flag.h"
#include "bench/median.h"
#include "model/library_settings.h"
#include "model/model_config.h"
#include "model/onednn_resnet18.h"
#include "model/torch_threads.h"
#include "model/video_model.h"

ABSL_FLAG(std::string, device, "auto", "auto, cpu or cuda:N.");
ABSL_FLAG(std::string, sizes, "112,224", "Square frame sizes (crop sizes) to measure.");
ABSL_FLAG(std::string, batches, "16", "Frames per backbone batch: one table row group each.");
ABSL_FLAG(int, rounds, 7, "Timed rounds (after one warm-up); the median is reported.");
ABSL_FLAG(int, threads, 0, "LibTorch intra-op threads (0: LibTorch's default).");
ABSL_FLAG(int, gemm_size, 0,
          "Side of the square matrix product that measures the peak; 0: 2048 on the CPU, 8192 "
          "on a GPU.");
ABSL_FLAG(bool, cudnn_benchmark, false,
          "Let cuDNN time its algorithms for each new shape and keep the fastest.");

namespace {

using vidclf::bench::Median;
using vidclf::bench::ParseList;
using vidclf::model::BackboneKernels;
using vidclf::model::InferenceOptions;
using vidclf::model::OneDnnResNet18;
using vidclf::model::Precision;
using vidclf::model::VideoModel;

struct Variant {
  std::string name;
  InferenceOptions options = InferenceOptions::Exact();
  // Frames start in host memory, as the server's do, instead of on the device; pinned (page-locked)
  // memory lets the GPU copy them itself.
  bool frames_from_host = false;
  bool pinned = false;
  std::unique_ptr<VideoModel> model;
  std::vector<double> seconds;
};

// Floating-point operations (a multiply-add counts two) of ResNet18's convolutions for one
// size x size frame; the pooling, additions and ReLUs are a rounding error beside them.
double ResNet18Flops(int64_t size) {
  double flops = 0;
  // Adds a k x k convolution with `stride` and torchvision's padding k / 2; returns its side.
  auto conv = [&flops](int64_t side, int64_t in, int64_t out, int64_t k, int64_t stride) {
    const int64_t out_side = (side + 2 * (k / 2) - k) / stride + 1;
    flops += 2.0 * static_cast<double>(in * out * k * k * out_side * out_side);
    return out_side;
  };
  int64_t side = conv(size, 3, 64, 7, 2);
  side = (side + 2 - 3) / 2 + 1;  // max pooling 3x3, stride 2, padding 1
  int64_t channels = 64;
  for (const int64_t width : {64, 128, 256, 512}) {
    const int64_t stride = width == 64 ? 1 : 2;
    const int64_t block_in = side;
    side = conv(side, channels, width, 3, stride);
    side = conv(side, width, width, 3, 1);
    if (stride != 1 || channels != width) conv(block_in, channels, width, 1, stride);
    side = conv(conv(side, width, width, 3, 1), width, width, 3, 1);
    channels = width;
  }
  return flops;
}

#ifdef VIDCLF_HAVE_DNNL
// oneDNN's u8 x s8 -> s32 matrix product of two n x n matrices, the int8 backbone's arithmetic.
class Int8MatrixProduct {
 public:
  explicit Int8MatrixProduct(int64_t n) {
    using dnnl::memory;
    auto desc = [n](memory::data_type type) {
      return memory::desc({n, n}, type, memory::format_tag::ab);
    };
    const dnnl::matmul::desc matmul(desc(memory::data_type::u8), desc(memory::data_type::s8),
                                    desc(memory::data_type::s32));
    primitive_ = dnnl::matmul(dnnl::matmul::primitive_desc(matmul, engine_));
    for (const auto type : {memory::data_type::u8, memory::data_type::s8}) {
      inputs_.emplace_back(desc(type), engine_);
      std::memset(inputs_.back().get_data_handle(), 1, n * n);
    }
    output_ = memory(desc(memory::data_type::s32), engine_);
  }
  void Run() {
    dnnl::stream stream(engine_);
    primitive_.execute(
        stream,
        {{DNNL_ARG_SRC, inputs_[0]}, {DNNL_ARG_WEIGHTS, inputs_[1]}, {DNNL_ARG_DST, output_}});
    stream.wait();
  }

 private:
  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  dnnl::primitive primitive_;
  std::vector<dnnl::memory> inputs_;
  dnnl::memory output_;
};
#endif

// A model of `config` with the global RNG's weights, saved as a bundle with an int8 calibration
// measured on 64 frames like the benchmark's, and loaded with `options` (int8).
std::unique_ptr<VideoModel> Int8Model(const vidclf::model::ModelConfig& config,
                                      const InferenceOptions& options) {
  auto fail = [](const absl::Status& status) {
    std::cerr << "int8: " << status << "\n";
    std::exit(1);
  };
  auto exact = VideoModel::Create(config);
  if (!exact.ok()) fail(exact.status());
  const std::filesystem::path bundle = std::filesystem::temp_directory_path() /
                                       ("vidclf-backbone-bench-" + std::to_string(getpid()));
  if (auto status = (*exact)->Save(bundle.string()); !status.ok()) fail(status);
  const int64_t side = config.input.crop_size;
  auto calibration = vidclf::model::CalibrateInt8(
      (*exact)->backbone(), {torch::randn({32, 3, side, side}), torch::randn({32, 3, side, side})});
  if (!calibration.ok()) fail(calibration.status());
  if (auto status = WriteInt8Calibration(*calibration, bundle.string()); !status.ok()) fail(status);
  auto model = VideoModel::Load(bundle.string(), options);
  std::filesystem::remove_all(bundle);
  if (!model.ok()) fail(model.status());
  return *std::move(model);
}

// Every layout and kernel choice in each precision, plus (on a GPU) the fastest-looking one fed
// from host memory, pageable (as the server's frames are) and pinned, which adds the copy.
std::vector<Variant> MakeVariants(const torch::Device& device, int size) {
  vidclf::model::ModelConfig config;
  config.name = "bench";
  config.version = "1";
  config.labels = {"a", "b"};
  config.input.crop_size = size;
  config.input.resize_shorter_side = size;
  std::vector<Variant> variants;
  const std::vector<Precision> precisions =
      device.is_cuda()
          ? std::vector<Precision>{Precision::kFp32, Precision::kFp16, Precision::kBf16}
          : std::vector<Precision>{Precision::kFp32};
  for (const Precision precision : precisions) {
    for (const auto& [channels_last, fused] :
         std::vector<std::pair<bool, bool>>{{false, false}, {true, false}, {true, true}}) {
      Variant variant;
      variant.name = PrecisionName(precision) + (channels_last ? " channels-last" : " NCHW") +
                     (fused ? ", fused" : "");
      variant.options.device = device;
      variant.options.precision = precision;
      variant.options.channels_last = channels_last;
      variant.options.backbone_kernels = fused ? BackboneKernels::kFused : BackboneKernels::kEager;
      variants.push_back(std::move(variant));
    }
  }
  if (device.is_cpu() && OneDnnResNet18::WinogradAvailable()) {
    Variant variant;
    variant.name = "fp32 channels-last, fused, Winograd 3x3";
    variant.options.device = device;
    variant.options.channels_last = true;
    variant.options.backbone_kernels = BackboneKernels::kWinograd;
    variants.push_back(std::move(variant));
  }
  if (device.is_cpu() && OneDnnResNet18::Bf16Available()) {
    Variant variant;
    variant.name = "bf16, oneDNN's bf16 kernels";
    variant.options.device = device;
    variant.options.precision = Precision::kBf16;
    variant.options.channels_last = true;
    variant.options.backbone_kernels = BackboneKernels::kFused;
    variants.push_back(std::move(variant));
  }
  if (device.is_cpu() && OneDnnResNet18::Int8Available()) {
    Variant variant;
    variant.name = "int8, oneDNN's int8 kernels";
    variant.options.device = device;
    variant.options.precision = Precision::kInt8;
    variant.options.backbone_kernels = BackboneKernels::kFused;
    variants.push_back(std::move(variant));
  }
  for (const bool pinned : {false, true}) {
    if (!device.is_cuda()) break;
    Variant variant;
    variant.name = std::string("fp16 channels-last, fused, frames from ") +
                   (pinned ? "pinned" : "pageable") + " host memory";
    variant.options.device = device;
    variant.options.precision = Precision::kFp16;
    variant.options.channels_last = true;
    variant.options.backbone_kernels = BackboneKernels::kFused;
    variant.frames_from_host = true;
    variant.pinned = pinned;
    variants.push_back(std::move(variant));
  }
  for (Variant& variant : variants) {
    torch::manual_seed(1);  // the same weights for every variant
    if (variant.options.precision == Precision::kInt8) {
      variant.model = Int8Model(config, variant.options);
      continue;
    }
    auto model = VideoModel::Create(config, variant.options);
    if (!model.ok()) {
      std::cerr << variant.name << ": " << model.status() << "\n";
      std::exit(1);
    }
    variant.model = *std::move(model);
  }
  return variants;
}

}  // namespace

int main(int argc, char** argv) {
  vidclf::model::RestartWithOpenBlasKernelsForThisCpu(argv);
  absl::ParseCommandLine(argc, argv);
  std::cerr << vidclf::model::ConfigureTorchThreads(absl::GetFlag(FLAGS_threads)) << "\n";
  auto device = vidclf::model::ResolveDevice(absl::GetFlag(FLAGS_device));
  if (!device.ok()) {
    std::cerr << device.status() << "\n";
    return 1;
  }
  at::globalContext().setBenchmarkCuDNN(absl::GetFlag(FLAGS_cudnn_benchmark));
  int64_t gemm_size = absl::GetFlag(FLAGS_gemm_size);
  if (gemm_size == 0) gemm_size = device->is_cuda() ? 8192 : 2048;

  // The peak of each precision: a square matrix product on the device, timed with the variants.
  std::map<Precision, std::pair<torch::Tensor, torch::Tensor>> gemm_inputs;
  for (const Precision precision : {Precision::kFp32, Precision::kFp16, Precision::kBf16}) {
    const absl::StatusOr<torch::Dtype> dtype = vidclf::model::BackboneDtype(precision, *device);
    if (!dtype.ok()) continue;  // a precision this device does not run
    gemm_inputs[precision] = {torch::randn({gemm_size, gemm_size}).to(*device, *dtype),
                              torch::randn({gemm_size, gemm_size}).to(*device, *dtype)};
  }

#ifdef VIDCLF_HAVE_DNNL
  std::unique_ptr<Int8MatrixProduct> int8_product;
  if (device->is_cpu() && OneDnnResNet18::Int8Available()) {
    int8_product = std::make_unique<Int8MatrixProduct>(gemm_size);
  }
#endif
  std::cout << "| frame size | batch | variant | ms per batch (median) | frames/s | GFLOP/s | "
               "matrix-product peak GFLOP/s | of the peak | time vs fp32 NCHW |\n"
               "|---|---|---|---|---|---|---|---|---|\n";
  for (const int64_t size : ParseList(absl::GetFlag(FLAGS_sizes))) {
    std::vector<Variant> variants = MakeVariants(*device, size);
    for (const int64_t batch : ParseList(absl::GetFlag(FLAGS_batches))) {
      std::map<Precision, std::vector<double>> gemm_seconds;
      for (Variant& variant : variants) variant.seconds.clear();
      torch::manual_seed(2);
      const torch::Tensor host_frames = torch::randn({batch, 3, size, size});
      const torch::Tensor frames = host_frames.to(*device);
      const torch::Tensor pinned_frames =
          device->is_cuda() ? host_frames.pin_memory() : host_frames;
      for (int round = 0; round <= absl::GetFlag(FLAGS_rounds); ++round) {
#ifdef VIDCLF_HAVE_DNNL
        if (int8_product) {
          const auto start = std::chrono::steady_clock::now();
          int8_product->Run();
          const double seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          if (round > 0) gemm_seconds[Precision::kInt8].push_back(seconds);
        }
#endif
        for (const auto& [precision, inputs] : gemm_inputs) {
          torch::InferenceMode inference;
          const auto start = std::chrono::steady_clock::now();
          // Reading one element waits for the device without timing a copy of the product.
          (void)torch::mm(inputs.first, inputs.second)[0][0].item<float>();
          const double seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          if (round > 0) gemm_seconds[precision].push_back(seconds);
        }
        for (Variant& variant : variants) {
          const auto start = std::chrono::steady_clock::now();
          const torch::Tensor& input = !variant.frames_from_host ? frames
                                       : variant.pinned          ? pinned_frames
                                                                 : host_frames;
          auto embeddings = variant.model->Embed(input, /*max_batch_frames=*/batch);
          if (!embeddings.ok()) {
            std::cerr << variant.name << ": " << embeddings.status() << "\n";
            return 1;
          }
          // Reading the embeddings waits for the device, as an answer does.
          (void)embeddings->cpu();
          const double seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          if (round > 0) variant.seconds.push_back(seconds);  // round 0 warms up
        }
      }
      const double baseline = Median(variants.front().seconds);
      const double flops = ResNet18Flops(size) * batch;
      for (const Variant& variant : variants) {
        const double peak = 2.0 * std::pow(static_cast<double>(gemm_size), 3) /
                            Median(gemm_seconds[variant.options.precision]);
        const double median = Median(variant.seconds);
        std::cout << "| " << size << "×" << size << " | " << batch << " | " << variant.name << " | "
                  << std::fixed << std::setprecision(1) << median * 1e3 << " | "
                  << std::setprecision(0) << batch / median << " | " << flops / median / 1e9
                  << " | " << peak / 1e9 << " | " << std::setprecision(2) << flops / median / peak
                  << " | " << median / baseline << " |\n";
      }
    }
  }
  std::cout << "\nResNet18 convolutions: " << std::fixed << std::setprecision(3)
            << ResNet18Flops(224) / 1e9 << " GFLOP per 224×224 frame, " << ResNet18Flops(112) / 1e9
            << " per 112×112 (a multiply-add counts two). Peak: a " << gemm_size << "×" << gemm_size
            << " matrix product in the variant's precision (int8: oneDNN's u8×s8 into int32, "
               "counted as FLOP), 2n³ FLOP, timed in the same rounds."
            << (absl::GetFlag(FLAGS_cudnn_benchmark) ? " cuDNN benchmark mode on." : "") << "\n";
  return 0;
}
