// vidclf's engine in-process, with no gRPC, for bench/e2e/run_benchmark.py: the server's
// decode stage, backbone batcher and head stage, built with the server's default options, classify
// one video at a time as the harness asks.
//
// Reads requests from standard input, one per line: a video's path, then optional words
// `snap-to-keyframes` and `skip-loop-filter`. Answers each with one JSON line on standard output,
// written once the call has finished: the wall time from submission to the answer and the
// engine's stage times, or the error. Prints {"ready": true} once the models are loaded.
//
//   vidclf-e2e-bench --repository REPO [--model NAME] [--cores N] [--backbone_kernels winograd]
//                    [--embed_while_decoding] [--nosplit_at_keyframes]
//                    [--nobind_backbone_threads] [--device cuda:0 --precision fp16]
//                    [--decode_device cuda:0 [--idle_decoders 32] [--nvdec_conversion host]]
#include <fstream>
#include <future>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "media/decoder_pool.h"
#include "media/libav_settings.h"
#include "media/nvdec_device.h"
#include "model/library_settings.h"
#include "model/tensor_heap.h"
#include "model/torch_threads.h"
#include "model/video_model.h"
#include "server/engine/classify_engine.h"

extern "C" {
#include <libavutil/log.h>
}

ABSL_FLAG(std::string, repository, "", "Model repository (REPO/<name>/<version>/).");
ABSL_FLAG(std::string, model, "", "Model to classify with; empty: the repository's default.");
ABSL_FLAG(int, cores, 0, "Cores that decoding and the backbone share; 0: the machine's.");
ABSL_FLAG(std::string, backbone_kernels, "winograd",
          "fused, winograd or eager, as vidclf-server's flag.");
ABSL_FLAG(bool, embed_while_decoding, false, "As vidclf-server's --embed-while-decoding.");
ABSL_FLAG(bool, split_at_keyframes, true,
          "Let a call decoding alone split its frames between two decoders at a keyframe.");
ABSL_FLAG(bool, bind_backbone_threads, true, "As vidclf-server's --bind-backbone-threads.");
ABSL_FLAG(std::string, device, "cpu", "cpu or cuda:N, as vidclf-server's --device.");
ABSL_FLAG(std::string, precision, "fp32", "The backbone's: fp32, or on CUDA fp16 or bf16.");
ABSL_FLAG(std::string, decode_device, "cpu", "cpu, or cuda:N to decode by that GPU's NVDEC.");
ABSL_FLAG(int, idle_decoders, 32, "As vidclf-server's --idle-nvdec-decoders.");
ABSL_FLAG(std::string, nvdec_conversion, "gpu", "As vidclf-server's --nvdec-conversion.");

namespace {

using vidclf::engine::ClassifyEngine;
using vidclf::engine::ClassifyInput;
using vidclf::engine::ClassifyResult;

std::string Error(const std::string& message) { return nlohmann::json{{"error", message}}.dump(); }

// Classifies the video at `path` and waits for the answer.
std::string ClassifyOnce(ClassifyEngine& engine, const std::string& path,
                         const std::vector<std::string>& options) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return Error("cannot read " + path);
  std::ostringstream bytes;
  bytes << file.rdbuf();
  const std::string video = bytes.str();

  ClassifyInput input;
  input.source = vidclf::media::VideoSource::Bytes(video);
  input.model = absl::GetFlag(FLAGS_model);
  for (const std::string& option : options) {
    if (option == "snap-to-keyframes") {
      input.sampling.snap_to_keyframes = true;
    } else if (option == "skip-loop-filter") {
      input.sampling.skip_loop_filter = true;
    } else {
      return Error("unknown option " + option);
    }
  }
  std::promise<absl::StatusOr<ClassifyResult>> answer;
  const absl::Time sent = absl::Now();
  engine.Submit(std::move(input), [&answer](absl::StatusOr<ClassifyResult> result) {
    answer.set_value(std::move(result));
  });
  absl::StatusOr<ClassifyResult> result = answer.get_future().get();
  const double wall = absl::ToDoubleSeconds(absl::Now() - sent);
  if (!result.ok()) return Error(result.status().ToString());
  return nlohmann::json{{"wall_s", wall},
                        {"queue_s", result->queue_seconds},
                        {"decode_s", result->decode_seconds},
                        {"preprocess_s", result->preprocess_seconds},
                        {"embed_s", result->embed_seconds},
                        {"head_s", result->head_seconds},
                        {"frames", result->frame_timestamps_seconds.size()},
                        {"decoded_on", result->decoded_on},
                        {"top", result->top_k.empty() ? "" : result->top_k.front().first},
                        {"score", result->top_k.empty() ? 0.0f : result->top_k.front().second}}
      .dump();
}

int Run() {
  int cores = absl::GetFlag(FLAGS_cores);
  if (cores <= 0) cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  vidclf::model::ConfigureTorchThreads(cores);
  vidclf::model::TuneHeapForTensors();  // as the server does on glibc (server/heap.h)
  vidclf::media::LibavSettings libav;
  libav.log_level = AV_LOG_ERROR;
  vidclf::media::ConfigureLibav(libav);

  // Before the models, which would otherwise make the GPU's primary context first.
  std::unique_ptr<vidclf::media::NvdecDevice> nvdec;
  if (const std::string decode_device = absl::GetFlag(FLAGS_decode_device);
      decode_device != "cpu") {
    auto opened = vidclf::media::NvdecDevice::Open(decode_device, /*max_sessions=*/64);
    if (!opened.ok()) {
      std::cerr << "vidclf-e2e-bench: " << opened.status() << "\n";
      return 1;
    }
    nvdec = *std::move(opened);
  }
  std::unique_ptr<vidclf::media::DecoderPool> decoder_pool;
  if (nvdec != nullptr && absl::GetFlag(FLAGS_idle_decoders) > 0) {
    decoder_pool = std::make_unique<vidclf::media::DecoderPool>(absl::GetFlag(FLAGS_idle_decoders));
  }
  const absl::StatusOr<torch::Device> device =
      vidclf::model::ResolveDevice(absl::GetFlag(FLAGS_device));
  const absl::StatusOr<vidclf::model::Precision> precision =
      vidclf::model::ParsePrecision(absl::GetFlag(FLAGS_precision));
  const absl::StatusOr<vidclf::model::BackboneKernels> kernels =
      vidclf::model::ParseBackboneKernels(absl::GetFlag(FLAGS_backbone_kernels));
  for (const absl::Status& status : {device.status(), precision.status(), kernels.status()}) {
    if (!status.ok()) {
      std::cerr << "vidclf-e2e-bench: " << status << "\n";
      return 1;
    }
  }
  vidclf::model::InferenceOptions inference;  // the server's defaults, with these flags'
  inference.device = *device;
  inference.precision = *precision;
  inference.backbone_kernels = *kernels;
  auto repository =
      vidclf::engine::ModelRepository::Load(absl::GetFlag(FLAGS_repository), "", inference);
  if (!repository.ok()) {
    std::cerr << "vidclf-e2e-bench: " << repository.status() << "\n";
    return 1;
  }
  vidclf::engine::EngineOptions options;
  options.cores = cores;
  options.batching.embed_while_decoding = absl::GetFlag(FLAGS_embed_while_decoding);
  options.decode.split_at_keyframes = absl::GetFlag(FLAGS_split_at_keyframes);
  options.bind_backbone_threads = absl::GetFlag(FLAGS_bind_backbone_threads);
  options.decode.nvdec = nvdec.get();
  options.decode.decoder_pool = decoder_pool.get();
  options.decode.hand_over_gpu_pictures = nvdec != nullptr &&
                                          absl::GetFlag(FLAGS_nvdec_conversion) == "gpu" &&
                                          nvdec->name() == device->str();
  options.decode_on_gpu = nvdec != nullptr;
  auto engine = ClassifyEngine::Create(options, *std::move(repository));
  if (!engine.ok()) {
    std::cerr << "vidclf-e2e-bench: " << engine.status() << "\n";
    return 1;
  }
  std::cout << "{\"ready\": true}" << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::vector<std::string> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (words.empty()) continue;
    const std::string path = words.front();
    words.erase(words.begin());
    std::cout << ClassifyOnce(**engine, path, words) << std::endl;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  vidclf::model::RestartWithOpenBlasKernelsForThisCpu(argv);
  absl::ParseCommandLine(argc, argv);
  return Run();
}
