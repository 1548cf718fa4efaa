// Forward-pass time and peak memory of every attention mechanism over sequence lengths, and the
// per-frame cost of the streaming heads against recomputing softmax attention over the history.
//
//   vidclf-attention-bench [--device cpu] [--lengths 256,...] [--linear_lengths ...]
//                          [--repeats 5] > results.csv
//
// On the CPU, peak memory is the process's resident high-water mark (VmHWM) during the forward
// pass, above the resident size once the inputs exist; the mark is reset before each run through
// /proc/self/clear_refs. On a GPU it is the caching allocator's peak of bytes held by tensors,
// above those held before the run. One CSV row per measurement goes to stdout;
// bench/attention/report.py turns the CPU rows into docs/attention-benchmark.md and its chart.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "bench/list_flag.h"
#include "model/attention/registry.h"
#include "model/device_memory.h"
#include "model/heads/gru_head.h"
#include "model/heads/head_stream.h"
#include "model/heads/transformer_head.h"
#include "model/library_settings.h"
#include "model/resnet18.h"
#include "model/torch_threads.h"
#include "model/video_model.h"

ABSL_FLAG(std::string, device, "cpu", "cpu or cuda:N.");
ABSL_FLAG(std::string, lengths, "256,512,1024,2048,4096,8192,16384", "Lengths for all mechanisms.");
ABSL_FLAG(std::string, linear_lengths, "32768,65536", "Extra lengths for linear-time mechanisms.");
ABSL_FLAG(std::string, mechanisms, "", "Mechanisms to sweep (registry names); empty: all eight.");
ABSL_FLAG(int, repeats, 5, "Timed runs per point (after one warm-up); the median is reported.");
ABSL_FLAG(std::string, streaming_history, "10,1000,10000", "Frames seen, for the streaming step.");
ABSL_FLAG(bool, streaming_only, false, "Measure only the streaming step.");

namespace {

using vidclf::bench::ParseList;
using vidclf::model::attention::AttentionOptions;
constexpr int64_t kHeads = 8;
constexpr int64_t kHeadDim = 64;

int64_t StatusKib(const std::string& key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::stoll(line.substr(key.size() + 1));
  }
  return -1;
}

void ResetPeakMemory() { std::ofstream("/proc/self/clear_refs") << "5"; }

int64_t AvailableMemoryKib() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t value = 0;
  std::string unit;
  while (meminfo >> key >> value >> unit) {
    if (key == "MemAvailable:") return value;
  }
  return 0;
}

// Waits for the work queued on `device`, so that a timer read after it has seen the work done.
void Synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

template <typename Body>
std::pair<double, double> MedianMillisecondsAndPeakMib(const torch::Device& device, int repeats,
                                                       Body body) {
  body();  // warm-up: first-touch allocations, thread pool start, kernel selection
  Synchronize(device);
  std::vector<double> milliseconds;
  int64_t peak_bytes = 0;
  for (int r = 0; r < repeats; ++r) {
    int64_t before = 0;
    if (device.is_cuda()) {
      vidclf::model::ResetCudaPeak(device.index());
      before = vidclf::model::CudaAllocated(device.index()).current;
    } else {
      ResetPeakMemory();
      before = StatusKib("VmRSS") * 1024;
    }
    const auto start = std::chrono::steady_clock::now();
    body();
    Synchronize(device);
    milliseconds.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
    const int64_t peak = device.is_cuda() ? vidclf::model::CudaAllocated(device.index()).peak
                                          : StatusKib("VmHWM") * 1024;
    peak_bytes = std::max(peak_bytes, peak - before);
  }
  std::sort(milliseconds.begin(), milliseconds.end());
  return {milliseconds[milliseconds.size() / 2], peak_bytes / 1048576.0};
}

bool IsLinearTime(const std::string& type) { return type != "softmax"; }

void SweepMechanisms(const torch::Device& device) {
  std::vector<int64_t> lengths = ParseList(absl::GetFlag(FLAGS_lengths));
  const std::vector<int64_t> extra = ParseList(absl::GetFlag(FLAGS_linear_lengths));
  for (const std::string& type : vidclf::model::attention::AttentionNames()) {
    const std::vector<std::string> wanted =
        absl::StrSplit(absl::GetFlag(FLAGS_mechanisms), ',', absl::SkipEmpty());
    if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), type) == wanted.end()) continue;
    std::vector<int64_t> sweep = lengths;
    if (IsLinearTime(type)) sweep.insert(sweep.end(), extra.begin(), extra.end());
    for (int64_t n : sweep) {
      // Softmax without a fused kernel holds two [H, N, N] float matrices (scores,
      // probabilities): skip what cannot fit in the host's memory. A GPU's running out is caught.
      const int64_t needed_kib = IsLinearTime(type) ? 0 : 2 * kHeads * n * n * 4 / 1024;
      if (!device.is_cuda() && needed_kib > AvailableMemoryKib() * 9 / 10) {
        std::cout << "attention," << type << "," << n << ",skipped,needs " << needed_kib / 1048576
                  << " GiB" << std::endl;
        continue;
      }
      AttentionOptions options;
      options.type = type;
      options.head_dim = kHeadDim;
      options.value_dim = kHeadDim;
      options.num_heads = kHeads;
      options.max_length = n;
      torch::manual_seed(0);
      auto mechanism = vidclf::model::attention::MakeAttention(options);
      if (!mechanism.ok()) {
        std::cerr << mechanism.status() << "\n";
        continue;
      }
      (*mechanism)->to(device);
      const auto random = [&] { return torch::randn({1, kHeads, n, kHeadDim}).to(device); };
      const torch::Tensor q = random(), k = random(), v = random();
      torch::InferenceMode inference;
      const int repeats = n >= 16384 && !device.is_cuda()
                              ? std::min(3, absl::GetFlag(FLAGS_repeats))
                              : absl::GetFlag(FLAGS_repeats);
      try {
        const auto [ms, mib] = MedianMillisecondsAndPeakMib(
            device, repeats, [&] { (*mechanism)->forward(q, k, v, torch::Tensor()); });
        std::cout << "attention," << type << "," << n << "," << ms << "," << mib << std::endl;
      } catch (const c10::Error& error) {  // out of GPU memory, for one
        std::cout << "attention," << type << "," << n << ",skipped,"
                  << std::string(error.what_without_backtrace()).substr(0, 80) << std::endl;
      }
    }
  }
}

// Cost of taking in one more frame after `history` frames, for a live stream, through whole heads
// with seed 004's sizes: the recurrent ones (GRU; transformer with causal-linear attention) step
// their state; a softmax transformer either recomputes the whole history or slides a window.
void SweepStreamingStep(const torch::Device& device) {
  using vidclf::model::HeadState;
  const int repeats = std::max(absl::GetFlag(FLAGS_repeats), 20);
  constexpr int64_t kClasses = 5;
  auto transformer = [&device](const std::string& type) {
    AttentionOptions attention;
    attention.type = type;
    torch::manual_seed(0);
    vidclf::model::TransformerHead head(
        vidclf::model::TransformerHeadOptions(kClasses).attention(attention));
    head->eval();
    head->to(device);
    return head;
  };
  torch::manual_seed(0);
  vidclf::model::GruHead gru{vidclf::model::GruHeadOptions(kClasses)};
  gru->eval();
  gru->to(device);
  vidclf::model::TransformerHead causal_linear = transformer("causal-linear");
  vidclf::model::TransformerHead softmax = transformer("softmax");
  const vidclf::model::SlidingWindowOptions window;  // 16 frames, stride 4
  torch::InferenceMode inference;
  const torch::Tensor frame =
      torch::randn({1, 1, vidclf::model::kResNet18EmbeddingSize}).to(device);
  for (int64_t history : ParseList(absl::GetFlag(FLAGS_streaming_history))) {
    const torch::Tensor past =
        torch::randn({1, history, vidclf::model::kResNet18EmbeddingSize}).to(device);
    auto report = [&](const std::string& name, std::pair<double, double> ms_and_mib) {
      std::cout << "streaming," << name << "," << history << "," << ms_and_mib.first << ","
                << ms_and_mib.second << std::endl;
    };
    const HeadState gru_state = gru->step(past, {}).second;
    report("gru",
           MedianMillisecondsAndPeakMib(device, repeats, [&] { gru->step(frame, gru_state); }));

    const HeadState linear_state = causal_linear->step(past, {}).second;
    report("causal-linear", MedianMillisecondsAndPeakMib(device, repeats, [&] {
             causal_linear->step(frame, linear_state);
           }));

    // A sliding window re-runs the head every `stride` frames: time `stride` steps, per frame.
    const HeadState window_state = StepHead(*softmax, window, past, {}).second;
    const auto [window_ms, window_mib] = MedianMillisecondsAndPeakMib(device, repeats, [&] {
      HeadState state = window_state;
      for (int64_t i = 0; i < window.stride_frames; ++i) {
        state = StepHead(*softmax, window, frame, state).second;
      }
    });
    report("softmax-window-16", {window_ms / window.stride_frames, window_mib});

    // Without a state, softmax must run the head over the whole history plus the new frame.
    const torch::Tensor all = torch::cat({past, frame}, 1);
    const torch::Tensor length = torch::full({1}, history + 1, torch::kLong).to(device);
    report("softmax-recompute", MedianMillisecondsAndPeakMib(
                                    device, history >= 10000 ? 1 : (history >= 1000 ? 3 : repeats),
                                    [&] { softmax->forward(all, length); }));
  }
}

}  // namespace

int main(int argc, char** argv) {
  vidclf::model::RestartWithOpenBlasKernelsForThisCpu(argv);
  absl::ParseCommandLine(argc, argv);
  const auto device = vidclf::model::ResolveDevice(absl::GetFlag(FLAGS_device));
  if (!device.ok()) {
    std::cerr << device.status() << "\n";
    return 1;
  }
  std::cerr << vidclf::model::ConfigureTorchThreads(
                   static_cast<int>(std::thread::hardware_concurrency()))
            << std::endl;
  std::cout << "kind,mechanism,length,median_ms,peak_mib" << std::endl;
  if (!absl::GetFlag(FLAGS_streaming_only)) SweepMechanisms(*device);
  SweepStreamingStep(*device);
  return 0;
}
