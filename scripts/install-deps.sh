#!/usr/bin/env bash
# Installs every Debian (bookworm) package that vidclf's build, tests and demo need.
# Idempotent: when all packages are present it installs nothing and does not touch the network.
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake pkg-config
  # RPC and configuration
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  nlohmann-json3-dev
  # command lines of the three executables; the server's log; TLS and token digests (and the
  # openssl command that makes test certificates)
  libcli11-dev libspdlog-dev libssl-dev openssl
  # media
  libavformat-dev libavcodec-dev libavutil-dev libswscale-dev ffmpeg
  # cameras (V4L2) for `vidclf stream`
  libavdevice-dev
  # model; OpenBLAS because LibTorch's matmuls run ~30x slower on the reference BLAS
  libtorch-dev libopenblas0-pthread
  # metrics
  prometheus-cpp-dev prometheus
  # tests and benchmarks; nginx for the replicas-behind-a-balancer test (deploy/nginx/)
  libgtest-dev libgmock-dev libbenchmark-dev python3-grpcio python3-protobuf nginx
  # real-world sample videos and images for tests/unit/decode_matrix_test.cc
  python3-imageio
  # torchvision interop test (model/scripts/export_resnet18.py), and the Python reference
  # pipeline of the serving benchmark (bench/serving/), which decodes with PyAV
  python3-torchvision python3-av
  # benchmark charts
  python3-matplotlib
  # media sanitizer and fuzzing build (scripts/media-sanitizer-check.sh): clang, its ASan, UBSan
  # and libFuzzer runtimes, llvm-symbolizer for readable reports
  clang-14 libclang-rt-14-dev llvm-14
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
