// What one more frame costs a live stream's head after n frames: a recurrent step (the GRU; the
// transformer with causal-linear attention) against re-running a softmax transformer over the
// whole history, as a head without a recurrent step would have to for an exact answer. The heads
// take turns within every round, so drift on a shared machine hits them alike. On CUDA, the
// causal-linear step is also timed replaying its captured CUDA graph (model/heads/step_graph.h).
// Prints a Markdown table (median over rounds) for docs/streaming-benchmark.md.
//
// With --streams, a second table: one new frame for each of B streams at different points, stepped
// together (VideoModel::StreamStepEach), as a server following B cameras could; a step reads the
// head's weights once for all B. The causal-linear head is timed with its float32 weights and then
// with int8 copies of them (StepWeights::kInt8).
//
//   vidclf-step-bench [--device cpu] [--frames 10,1000,10000] [--streams 1,4,16] [--rounds 9]
//                     [--threads 0]
#include <torch/torch.h>

#include <chrono>
#include <iomanip>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "bench/list_flag.h"
#include "bench/median.h"
#include "model/library_settings.h"
#include "model/tensor_heap.h"
#include "model/torch_threads.h"
#include "model/video_model.h"

ABSL_FLAG(std::string, device, "cpu", "cpu or cuda:N: where the heads run.");
ABSL_FLAG(std::string, frames, "10,1000,10000", "Frames seen before the timed frame.");
ABSL_FLAG(std::string, streams, "",
          "Streams stepped together, for the second table (empty: no second table).");
ABSL_FLAG(int, rounds, 9, "Timed rounds; the median is reported.");
ABSL_FLAG(int, threads, 0, "LibTorch intra-op threads (0: LibTorch's default).");

namespace {

using vidclf::bench::Median;
using vidclf::model::HeadState;
using vidclf::model::ModelConfig;
using vidclf::model::VideoModel;
using Clock = std::chrono::steady_clock;

constexpr int64_t kEmbedding = 512;

std::unique_ptr<VideoModel> Make(const std::string& head, const std::string& attention,
                                 bool cuda_graph_step = false, bool int8_step_weights = false) {
  ModelConfig config;
  config.name = head + "-" + attention;
  config.version = "1";
  config.labels = {"a", "b", "c", "d"};
  config.head = *vidclf::model::ParseHeadType(head);
  config.transformer.attention.type = attention;
  config.transformer.attention_substitutions = {};
  const absl::StatusOr<torch::Device> device =
      vidclf::model::ResolveDevice(absl::GetFlag(FLAGS_device));
  if (!device.ok()) {
    std::cerr << device.status() << "\n";
    std::exit(1);
  }
  vidclf::model::InferenceOptions options = vidclf::model::InferenceOptions::Exact();
  options.device = *device;
  options.cuda_graph_step = cuda_graph_step;
  options.step_weights =
      int8_step_weights ? vidclf::model::StepWeights::kInt8 : vidclf::model::StepWeights::kFloat32;
  auto model = VideoModel::Create(config, options);
  if (!model.ok()) {
    std::cerr << model.status() << "\n";
    std::exit(1);
  }
  return *std::move(model);
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The head's state after `frames` frames, stepped in chunks (as exact as one at a time).
HeadState Advance(const VideoModel& model, const torch::Tensor& history, int64_t frames) {
  HeadState state;
  for (int64_t begin = 0; begin < frames; begin += 256) {
    const int64_t end = std::min(frames, begin + 256);
    state = model.StreamStep(history.slice(1, begin, end), state)->second;
  }
  return state;
}

// The second table: B streams, stream b having seen 10 + 37 b frames, each take one new frame in
// one StreamStepEach. The heads take turns within every round.
void TimeStreamsSteppedTogether(const VideoModel& gru, const VideoModel& linear,
                                const VideoModel& int8, int rounds) {
  std::cout << "| streams | GRU step ms | GRU per frame ms | causal-linear step ms | "
               "causal-linear per frame ms | that / one stream's step | int8 weights step ms | "
               "int8 weights per frame ms |\n"
            << "|---|---|---|---|---|---|---|---|\n";
  double one_stream_ms = 0;
  for (const int64_t streams : vidclf::bench::ParseList(absl::GetFlag(FLAGS_streams))) {
    std::vector<HeadState> gru_states, linear_states, int8_states;
    for (int64_t b = 0; b < streams; ++b) {
      const torch::Tensor history = torch::randn({1, 10 + 37 * b, kEmbedding});
      gru_states.push_back(Advance(gru, history, history.size(1)));
      linear_states.push_back(Advance(linear, history, history.size(1)));
      int8_states.push_back(Advance(int8, history, history.size(1)));
    }
    const torch::Tensor next = torch::randn({streams, 1, kEmbedding});
    std::vector<double> gru_seconds, linear_seconds, int8_seconds;
    for (int round = 0; round <= rounds; ++round) {  // round 0 warms up
      auto start = Clock::now();
      (void)gru.StreamStepEach(next, gru_states);
      const double gru_step = SecondsSince(start);
      start = Clock::now();
      (void)linear.StreamStepEach(next, linear_states);
      const double linear_step = SecondsSince(start);
      if (round == 0) continue;
      gru_seconds.push_back(gru_step);
      linear_seconds.push_back(linear_step);
    }
    // The int8 head in rounds of its own, right after: stepped in the same rounds, each head found
    // the other's weights in the cache and both came out slower (float32 at 4 streams 5.5-6.2 ms
    // against 2.9-3.1 alone), which a server running one of them would not see.
    for (int round = 0; round <= rounds; ++round) {
      (void)gru.StreamStepEach(next, gru_states);
      const auto start = Clock::now();
      (void)int8.StreamStepEach(next, int8_states);
      if (round > 0) int8_seconds.push_back(SecondsSince(start));
    }
    const double gru_ms = 1e3 * Median(gru_seconds), linear_ms = 1e3 * Median(linear_seconds);
    const double int8_ms = 1e3 * Median(int8_seconds);
    if (streams == 1) one_stream_ms = linear_ms;
    std::cout << std::fixed << std::setprecision(2) << "| " << streams << " | " << gru_ms << " | "
              << std::setprecision(3) << gru_ms / streams << " | " << std::setprecision(2)
              << linear_ms << " | " << std::setprecision(3) << linear_ms / streams << " | ";
    if (one_stream_ms > 0) {
      std::cout << std::setprecision(2) << linear_ms / streams / one_stream_ms;
    }
    std::cout << " | " << int8_ms << " | " << std::setprecision(3) << int8_ms / streams << " |\n"
              << std::flush;
  }
}

}  // namespace

int main(int argc, char** argv) {
  vidclf::model::RestartWithOpenBlasKernelsForThisCpu(argv);
  absl::ParseCommandLine(argc, argv);
  std::cerr << vidclf::model::ConfigureTorchThreads(absl::GetFlag(FLAGS_threads)) << "\n";
  vidclf::model::TuneHeapForTensors();  // as the server does on glibc (server/heap.h)
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  const std::unique_ptr<VideoModel> gru = Make("gru", "softmax");
  const std::unique_ptr<VideoModel> linear = Make("transformer", "causal-linear");
  const std::unique_ptr<VideoModel> softmax = Make("transformer", "softmax");
  const std::unique_ptr<VideoModel> int8 =
      Make("transformer", "causal-linear", /*cuda_graph_step=*/false, /*int8_step_weights=*/true);
  std::unique_ptr<VideoModel> graphed;
  if (linear->device().is_cuda()) {
    torch::manual_seed(0);
    graphed = Make("transformer", "causal-linear", /*cuda_graph_step=*/true);
  }
  const int rounds = absl::GetFlag(FLAGS_rounds);
  // A step must read every weight of the head once: reading as many bytes from memory, timed in
  // the same rounds, is its limit at batch 1.
  int64_t weight_bytes = 0;
  for (const torch::Tensor& parameter : linear->head().parameters()) {
    weight_bytes += parameter.numel() * static_cast<int64_t>(parameter.element_size());
  }
  const torch::Tensor same_bytes = torch::randn({weight_bytes / 4}).to(linear->device());

  std::cerr << "Heads on " << linear->device() << "\n";
  const std::vector<int64_t> frames_seen = vidclf::bench::ParseList(absl::GetFlag(FLAGS_frames));
  if (!frames_seen.empty()) {
    std::cout << "| frames seen | GRU step ms | causal-linear step ms | reading its " << std::fixed
              << std::setprecision(1) << weight_bytes / 1048576.0
              << " MiB of weights once ms | causal-linear / that | softmax over the history ms | "
                 "softmax / causal-linear |"
              << (graphed ? " causal-linear step, CUDA graph ms | that / reading |" : "") << "\n"
              << "|---|---|---|---|---|---|---|" << (graphed ? "---|---|" : "") << "\n";
  }
  for (const int64_t frames : frames_seen) {
    const torch::Tensor history = torch::randn({1, frames + 1, kEmbedding});
    const torch::Tensor next = history.slice(1, frames, frames + 1);
    const HeadState gru_state = Advance(*gru, history, frames);
    const HeadState linear_state = Advance(*linear, history, frames);
    const torch::Tensor lengths = torch::full({1}, frames + 1, torch::kLong);
    std::vector<double> gru_seconds, linear_seconds, read_seconds, softmax_seconds, graph_seconds;
    // Softmax over 10,000 frames takes seconds a run: fewer rounds there.
    const int softmax_rounds = frames >= 5000 ? 3 : rounds;
    for (int round = 0; round <= rounds; ++round) {  // round 0 warms up
      auto start = Clock::now();
      (void)gru->StreamStep(next, gru_state);
      const double gru_step = SecondsSince(start);
      start = Clock::now();
      (void)linear->StreamStep(next, linear_state);
      const double linear_step = SecondsSince(start);
      start = Clock::now();
      (void)same_bytes.sum().item<float>();
      const double read = SecondsSince(start);
      if (graphed) {
        start = Clock::now();
        (void)graphed->StreamStep(next, linear_state);
        if (round > 0) graph_seconds.push_back(SecondsSince(start));
      }
      if (round == 0) continue;
      gru_seconds.push_back(gru_step);
      linear_seconds.push_back(linear_step);
      read_seconds.push_back(read);
      if (round <= softmax_rounds) {
        start = Clock::now();
        (void)softmax->Classify(history, lengths);
        softmax_seconds.push_back(SecondsSince(start));
      }
    }
    const double softmax_ms = 1e3 * Median(softmax_seconds);
    const double linear_ms = 1e3 * Median(linear_seconds);
    const double read_ms = 1e3 * Median(read_seconds);
    std::cout << std::fixed << std::setprecision(2) << "| " << frames << " | "
              << 1e3 * Median(gru_seconds) << " | " << linear_ms << " | " << read_ms << " | "
              << linear_ms / read_ms << " | " << softmax_ms << " | " << std::setprecision(0)
              << softmax_ms / linear_ms << "x |";
    if (graphed) {
      const double graph_ms = 1e3 * Median(graph_seconds);
      std::cout << std::setprecision(3) << " " << graph_ms << " | " << std::setprecision(2)
                << graph_ms / read_ms << " |";
    }
    std::cout << "\n" << std::flush;
  }
  if (!absl::GetFlag(FLAGS_streams).empty()) {
    if (!frames_seen.empty()) std::cout << "\n";
    TimeStreamsSteppedTogether(*gru, *linear, *int8, rounds);
  }
  return 0;
}
