#!/usr/bin/env bash
# Installs every Debian (bookworm) package that vidclf's build, tests and demo need.
# Idempotent: when all packages are present it installs nothing and does not touch the network.
#
#   install-deps.sh           everything: build, tests, benchmarks, deployment checks
#   install-deps.sh --build   only what building the executables needs (the image's build stage)
set -euo pipefail

build_only=0
case "${1:-}" in
  --build) build_only=1 ;;
  "") ;;
  *) echo "usage: $0 [--build]" >&2; exit 2 ;;
esac

build_packages=(
  # toolchain; ccache keeps what a build compiled for the next build, in any folder
  build-essential cmake pkg-config ccache
  # RPC and configuration
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  nlohmann-json3-dev
  # command lines of the three executables; the server's log; TLS and token digests (and the
  # openssl command that makes test certificates)
  libcli11-dev libspdlog-dev libssl-dev openssl
  # vidclf-train's training-curve plots (PNG)
  libcairo2-dev
  # media
  libavformat-dev libavcodec-dev libavutil-dev libswscale-dev ffmpeg
  # cameras (V4L2) for `vidclf stream`
  libavdevice-dev
  # model; OpenBLAS because LibTorch's matmuls run ~30x slower on the reference BLAS
  libtorch-dev libopenblas0-pthread
  # oneDNN's own API, for the backbone's Winograd convolutions (its CMake package looks for
  # OpenCL, which Debian's build also targets)
  libdnnl-dev ocl-icd-opencl-dev
  # metrics, and the HTTP server /metrics is scraped on (an event loop, TLS through GnuTLS)
  prometheus-cpp-dev libmicrohttpd-dev
  # MQTT publishing of the registered sources' updates
  libmosquitto-dev
  # the server's allocator (server/heap.h)
  libjemalloc-dev
)

test_packages=(
  # a real Prometheus for the tests (and promtool)
  prometheus
  # tests and benchmarks; YAML for the observability test of deploy/; nginx for the
  # replicas-behind-a-balancer test (deploy/nginx/)
  libgtest-dev libgmock-dev libbenchmark-dev python3-grpcio python3-protobuf python3-yaml nginx
  # HTTPS scrapes of /metrics with a bearer token
  curl
  # the page for people and browsers' fetch (tests/integration/browser_test.py): headless
  # Chromium, driven over the DevTools protocol's WebSocket
  chromium-headless-shell python3-websocket
  # real RTSP cameras for the sources tests (tests/integration/rtsp_camera.py): GStreamer's RTSP
  # server through python3-gi, live H.264 from x264enc
  gir1.2-gst-rtsp-server-1.0 python3-gi gstreamer1.0-plugins-base gstreamer1.0-plugins-good
  gstreamer1.0-plugins-bad gstreamer1.0-plugins-ugly gstreamer1.0-libav
  # a real MQTT broker and its subscriber for the publishing tests
  mosquitto mosquitto-clients
  # the documentation site (mkdocs.yml), built strictly by tests/integration/docs_site_test.py
  mkdocs mkdocs-material
  # real-world sample videos and images for tests/media/decode_matrix_test.cc
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

# The deployment checks' tools (scripts/check-deploy.sh), as command:package. Each is installed only
# when its command is missing: a kubectl or Node.js that another package brought conflicts with
# Debian's kubernetes-client or npm, and is used as it is.
deploy_tools=(kubectl:kubernetes-client yamllint:yamllint docker-compose:docker-compose
  node:nodejs npm:npm readelf:binutils
  # the container test: a Docker engine, and debootstrap for a base image from Debian's packages
  dockerd:docker.io debootstrap:debootstrap)

packages=("${build_packages[@]}")
missing=()
if [ "$build_only" -eq 0 ]; then
  packages+=("${test_packages[@]}")
  for pair in "${deploy_tools[@]}"; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
  done
fi
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

[ "$build_only" -eq 1 ] && exit 0

# The npm packages of the deployment checks and of the WebVTT check, each pinned by its
# package-lock.json: `npm ci` again only when the lockfile has changed since the last one.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
for npm_dir in deploy/validate tests/webvtt; do
  stamp="$root/$npm_dir/node_modules/.lock-sha256"
  lock_sum="$(sha256sum "$root/$npm_dir/package-lock.json" | cut -d' ' -f1)"
  if [ "$(cat "$stamp" 2>/dev/null)" != "$lock_sum" ]; then
    echo "install-deps: npm ci in $npm_dir"
    (cd "$root/$npm_dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
    echo "$lock_sum" > "$stamp"
  fi
done
