#!/usr/bin/env bash
# The model library on a CUDA GPU, for docs/gpu-benchmark.md. Builds the model-only tree
# (-DVIDCLF_MODEL_ONLY=ON: LibTorch, Abseil, nlohmann-json and GoogleTest, no gRPC or FFmpeg)
# against the LibTorch inside this machine's PyTorch, runs the model tests (the GPU test
# included), then the backbone, attention and streaming-step benchmarks on cuda:0. Every log and
# table goes into OUTPUT_DIR; a step that fails is reported and the others still run.
#
#   bench/gpu/run.sh OUTPUT_DIR [BUILD_DIR]
#
# CMake finds the other dependencies as usual (CMAKE_PREFIX_PATH in the environment works).
set -uo pipefail

out=${1:?usage: bench/gpu/run.sh OUTPUT_DIR [BUILD_DIR]}
build=${2:-build-gpu}
mkdir -p "$out"
# shellcheck source=bench/gpu/step.sh
source "$(dirname "$0")/step.sh"

{
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
  python3 -c 'import torch; print("PyTorch", torch.__version__, "CUDA", torch.version.cuda,
      "cuDNN", torch.backends.cudnn.version(), "C++11 ABI", torch._C._GLIBCXX_USE_CXX11_ABI)'
  nproc
} >"$out/machine.txt" 2>&1
cat "$out/machine.txt"

torch_cmake=$(python3 -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
generator=()
keep_going=(-- -k)
if command -v ninja >/dev/null; then
  generator=(-G Ninja)
  keep_going=(-- -k 0)
fi
step configure cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DVIDCLF_MODEL_ONLY=ON -DCMAKE_PREFIX_PATH="$torch_cmake"
# Keeps going past a target that fails, so that the others still build and run.
step build cmake --build "$build" --parallel "$(nproc)" --target all benchmarks "${keep_going[@]}"

bin=$build/bin
export VIDCLF_TORCHVISION_PYTHON3=${VIDCLF_TORCHVISION_PYTHON3:-$(command -v python3)}
export VIDCLF_EXPORT_RESNET18_SCRIPT=$(cd "$(dirname "$0")/../.." && pwd)/model/scripts/export_resnet18.py
step model-tests "$bin/model_unit_tests"
step attention-exact-tests "$bin/attention_exact_tests"
step attention-approximate-tests "$bin/attention_approximate_tests"

step backbone "$bin/vidclf-backbone-bench" --device cuda:0 --sizes 112,224 \
  --batches 16,64,256,1024 --rounds 7
step backbone-cudnn-benchmark "$bin/vidclf-backbone-bench" --device cuda:0 --sizes 112,224 \
  --batches 16,64,256,1024 --rounds 7 --cudnn_benchmark
step attention "$bin/vidclf-attention-bench" --device cuda:0 \
  --lengths 256,1024,4096,16384,65536 --linear_lengths 262144 --repeats 7
step streaming-step "$bin/vidclf-step-bench" --device cuda:0 --frames 10,1000,10000 --rounds 21

if ((${#failed[@]})); then
  echo "failed: ${failed[*]}"
  exit 1
fi
echo "all steps passed"
