#!/usr/bin/env bash
# vidclf's server and engine on a CUDA GPU, for docs/gpu-serving-benchmark.md. Unpacks
# the Debian libraries that bench/gpu/pack-deps.sh packed, builds the server, the client and the
# in-process benchmark against the LibTorch inside this machine's PyTorch (no cameras, no
# vidclf-train, no tests), makes a repository of the demo models' configurations with seeded
# weights (vidclf-seeded-repository), then on each VIDEO measures:
#   - libavcodec alone (vidclf-decode-rate): every frame decoded and dropped, on the CPU and on
#     NVDEC, with decoders side by side: the decoders' own ceiling; and NVDEC's clips against the
#     CPU's (vidclf-decode-compare);
#   - NV12 pictures converted to the model's input by tensors, on the CPU and the GPU, beside
#     libswscale (vidclf-yuv-conversion-rate);
#   - the engine in-process (vidclf-e2e-bench), one call at a time;
#   - the server over gRPC at rising concurrency (vidclf bench) on SERVING_VIDEOS (default: every
#     VIDEO; none when empty), with the GPU's utilisation sampled by nvidia-smi;
#   - with LIVE_VIDEO, that file sent as each of N live feeds at once in real time (vidclf stream
#     --realtime), for each N of LIVE_FEEDS, with the server's metrics read before, after, and
#     LIVE_MEMORY_AFTER_S (10) seconds into the run (the device memory the feeds hold; the file
#     must play longer), and its threads' CPU time sampled (thread_cpu.py); with
#     LIVE_DECODE_DEVICE too, that file decoded by N decoders side by side alone, twice each
#     (vidclf-decode-rate): the decoders' own ceiling for those feeds.
# A variant is "MODEL_DEVICE PRECISION [DECODE_DEVICE [IDLE_DECODERS [NVDEC_CONVERSION
# [SERVER_FLAG...]]]]" (decode device cpu when left out; IDLE_DECODERS, the NVDEC decoders kept
# between calls, 32 when left out; NVDEC_CONVERSION, where NVDEC's frames become the model's
# input, gpu or host; SERVER_FLAGs, more of the server's flags, as --name=value). The servers
# allow MAX_NVDEC_SESSIONS (64) NVDEC decoders at once. Every
# log and result goes into OUTPUT_DIR, which bench/gpu/serving_report.py reads. PREBUILT=1 takes
# the binaries already in BUILD_DIR, to try the script on a machine without a GPU.
#
#   [INPROCESS_VARIANTS="cuda:0 fp16 cuda:0,cuda:0 fp16 cuda:0 0,cpu fp32"] \
#   [SERVING_VARIANTS="cpu fp32"] \
#   [SERVING_VIDEOS="A.mp4 B.mp4"] [CONCURRENCY=1,4,16,32] [DECODE_RATE_DEVICES="cpu cuda:0"] \
#   [LIVE_VIDEO=C.mp4 LIVE_FEEDS="16 64" [LIVE_DECODE_DEVICE=cuda:0]] \
#   bench/gpu/serve.sh DEPS.tar.xz CONFIGS_DIR OUTPUT_DIR VIDEO...
set -uo pipefail

deps=${1:?usage: bench/gpu/serve.sh DEPS.tar.xz CONFIGS_DIR OUTPUT_DIR VIDEO...}
configs=${2:?}
out=${3:?}
shift 3
videos=("$@")
build=${BUILD_DIR:-build-gpu-serve}
prefix=/opt/vidclf-deps
arch=x86_64-linux-gnu
lib=$prefix/usr/lib/$arch
tools=$prefix/tools
mkdir -p "$out" "$prefix" "$tools"
printf '%s\n' "${videos[@]}" >"$out/videos.txt"

# shellcheck source=bench/gpu/step.sh
source "$(dirname "$0")/step.sh"

{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c 'import torch; print("PyTorch", torch.__version__, "CUDA", torch.version.cuda)'
  echo "$(nproc) CPU cores; $(c++ --version | head -n 1)"
} >"$out/machine.txt" 2>&1
cat "$out/machine.txt"

run() { LD_LIBRARY_PATH=$lib "$@"; }
if [ -z "${PREBUILT:-}" ]; then
  step unpack tar -C "$prefix" -xJf "$deps" || exit 1
  # The carried programs find the carried libraries (grpc_cpp_plugin inherits protoc's); this
  # machine's own programs (the compiler, CMake, Python) keep theirs.
  for program in pkgconf protoc; do
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$lib" "$prefix/usr/bin/$program" \
      >"$tools/$program"
    chmod +x "$tools/$program"
  done
  # The carried headers go first on every compiler command line: PyTorch's include directory holds
  # a Protobuf of its own, which must not stand in for the one protoc generated code for.
  printf '#!/bin/sh\nexec %s -isystem %s -isystem %s "$@"\n' "$(command -v c++)" \
    "$prefix/usr/include" "$prefix/usr/include/$arch" >"$tools/c++"
  chmod +x "$tools/c++"

  # PyTorch's CMake package defines protobuf::libprotobuf before FindProtobuf can, as a target
  # with no library (its own Protobuf is linked into libtorch): every link names the carried one.
  torch_cmake=$(python3 -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
  export PKG_CONFIG_LIBDIR=$lib/pkgconfig:$prefix/usr/share/pkgconfig
  export PKG_CONFIG_SYSROOT_DIR=$prefix
  step configure cmake --fresh -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DVIDCLF_BUILD_TESTS=OFF -DVIDCLF_CAMERAS=OFF -DVIDCLF_TRAINING=OFF \
    -DCMAKE_POLICY_VERSION_MINIMUM=3.5 \
    -DCMAKE_PREFIX_PATH="$torch_cmake;$prefix/usr" -DPKG_CONFIG_EXECUTABLE="$tools/pkgconf" \
    -DProtobuf_PROTOC_EXECUTABLE="$tools/protoc" -DCMAKE_CXX_COMPILER="$tools/c++" \
    -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$lib" \
    -DCMAKE_CXX_STANDARD_LIBRARIES="$lib/libprotobuf.so" || exit 1
  step build cmake --build "$build" --parallel "$(nproc)" --target vidclf-server vidclf \
    vidclf-e2e-bench vidclf-seeded-repository vidclf-decode-rate vidclf-decode-compare \
    vidclf-yuv-conversion-rate -- -k 0 ||
    exit 1
fi
bin=$build/bin
repository=$build/seeded-repository
rm -rf "$repository"
step repository run "$bin/vidclf-seeded-repository" --configs "$configs" --output "$repository" ||
  exit 1

# The decoders alone: each file decoded whole by 1 to 64 decoders side by side; on a GPU also four
# times by each decoder, flushed in between or kept set up as the server's pooled decoders are; and
# a GPU's clips against the CPU's.
for decode_device in ${DECODE_RATE_DEVICES-cpu cuda:0}; do
  parallel=1,4,16,64
  [ "$decode_device" = cpu ] && parallel=1,16
  step "decode-rate-${decode_device%%:*}" run "$bin/vidclf-decode-rate" --rounds 1 \
    --decode_device "$decode_device" --parallel "$parallel" "${videos[@]}"
  if [ "$decode_device" != cpu ]; then
    step decode-reuse run "$bin/vidclf-decode-rate" --rounds 1 --passes 4 \
      --decode_device "$decode_device" --parallel 1,16 "${videos[@]}"
    step decode-kept run "$bin/vidclf-decode-rate" --rounds 1 --passes 4 --keep_set_up \
      --decode_device "$decode_device" --parallel 1,16 "${videos[@]}"
    step decode-compare run "$bin/vidclf-decode-compare" --decode_device "$decode_device" \
      "${videos[@]}"
  fi
done

if [ -n "${LIVE_VIDEO:-}" ] && [ -n "${LIVE_DECODE_DEVICE:-}" ]; then
  step live-decode-rate run "$bin/vidclf-decode-rate" --rounds 1 --passes 2 --keep_set_up \
    --decode_device "$LIVE_DECODE_DEVICE" --parallel "$(echo "$LIVE_FEEDS" | tr ' ' ,)" \
    "$LIVE_VIDEO"
fi

# Pictures converted to the model's input by tensors on the CPU and the GPU, beside libswscale.
step yuv-conversion run "$bin/vidclf-yuv-conversion-rate"

# A variant as a file name: cuda-fp16-nvdec, cuda-fp16-nvdec-fresh (no decoder kept between
# calls), cuda-fp16-nvdec-hostconv (NVDEC's frames converted on the host), cpu-fp32; each server
# flag adds its name and value (--head-threads=4: _head-threads.4).
variant_name() {
  local name=${1%%:*}-$2
  if [ -n "$3" ] && [ "$3" != cpu ]; then
    name=$name-nvdec
    [ "${4:-32}" = 0 ] && name=$name-fresh
    [ "${5:-gpu}" = host ] && name=$name-hostconv
  fi
  local flag
  for flag in ${6:-}; do
    flag=${flag#--}
    name=${name}_${flag//=/.}
  done
  echo "$name"
}

# In-process: two untimed calls on each file, then seven rounds over the files.
requests() {
  for _ in 1 2; do printf '%s\n' "${videos[@]}"; done
  for _ in $(seq 7); do printf '%s\n' "${videos[@]}"; done
}
default_variants="cuda:0 fp16 cuda:0,cuda:0 fp16,cpu fp32"
IFS=, read -r -a inprocess_variants <<<"${INPROCESS_VARIANTS-$default_variants}"
for variant in "${inprocess_variants[@]}"; do
  read -r device precision decode_device idle conversion <<<"$variant"
  name=inprocess-$(variant_name "$device" "$precision" "$decode_device" "$idle" "$conversion")
  requests | step "$name" run "$bin/vidclf-e2e-bench" --repository "$repository" \
    --device "$device" --precision "$precision" --decode_device "${decode_device:-cpu}" \
    --idle_decoders "${idle:-32}" --nvdec_conversion "${conversion:-gpu}"
done

# Over gRPC: a server per variant, loaded by the C++ client at rising concurrency, with the GPU
# sampled every 500 ms. The server is started directly, not through run(), so that $! is its
# process and TERM reaches it.
read -r -a serving_videos <<<"${SERVING_VIDEOS-${videos[*]}}"
metrics=http://127.0.0.1:9151/metrics
scrape() {
  python3 -c 'import sys, urllib.request as r; print(r.urlopen(sys.argv[1]).read().decode())' \
    "$metrics" >"$1" 2>&1
}
IFS=, read -r -a serving_variants <<<"${SERVING_VARIANTS-$default_variants}"
for variant in "${serving_variants[@]}"; do
  read -r device precision decode_device idle conversion flags <<<"$variant"
  name=serving-$(variant_name "$device" "$precision" "$decode_device" "$idle" "$conversion" \
    "$flags")
  # shellcheck disable=SC2086 # the flags are words
  LD_LIBRARY_PATH=$lib "$bin/vidclf-server" --model-repository "$repository" \
    --host 127.0.0.1 --grpc-port 50151 --metrics-port 9151 --device "$device" \
    --precision "$precision" --decode-device "${decode_device:-cpu}" --max-streams 160 \
    --idle-nvdec-decoders "${idle:-32}" --nvdec-conversion "${conversion:-gpu}" \
    --max-nvdec-sessions "${MAX_NVDEC_SESSIONS:-64}" ${flags:-} \
    >"$out/$name-server.txt" 2>&1 &
  server=$!
  for _ in $(seq 120); do
    grep -q "gRPC listening on" "$out/$name-server.txt" && break
    sleep 0.5
  done
  sampler=
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=timestamp,utilization.gpu,utilization.decoder,memory.used \
      --format=csv,noheader,nounits -lms 500 >"$out/$name-gpu.csv" 2>&1 &
    sampler=$!
  fi
  if [ "${#serving_videos[@]}" -gt 0 ]; then
    step "$name" run "$bin/vidclf" bench --server 127.0.0.1:50151 --json --warmup 8 \
      --concurrency "${CONCURRENCY-1,4,16,32}" --metrics-url "$metrics" "${serving_videos[@]}"
  fi
  for feeds in ${LIVE_FEEDS-}; do
    echo "== $name: $feeds live feeds of $LIVE_VIDEO"
    basename "$LIVE_VIDEO" >"$out/$name-live$feeds-file.txt"
    scrape "$out/$name-live$feeds-metrics-before.txt"
    python3 "$(dirname "$0")/thread_cpu.py" "$server" "$out/$name-live$feeds-threads.jsonl" &
    threads=$!
    feeders=()
    for feed in $(seq "$feeds"); do
      run "$bin/vidclf" stream --server 127.0.0.1:50151 --realtime --json --top-k 1 \
        "$LIVE_VIDEO" >"$out/$name-live$feeds-$feed.txt" 2>&1 &
      feeders+=($!)
    done
    # The memory the feeds hold, read while all are open.
    (sleep "${LIVE_MEMORY_AFTER_S:-10}" && scrape "$out/$name-live$feeds-metrics-during.txt") &
    during=$!
    wait "${feeders[@]}"
    wait "$during"
    kill -TERM "$threads"
    wait "$threads"
    scrape "$out/$name-live$feeds-metrics-after.txt"
  done
  [ -n "$sampler" ] && kill "$sampler"
  scrape "$out/$name-metrics.txt"
  kill -TERM "$server"
  wait "$server"
done
echo "done"
