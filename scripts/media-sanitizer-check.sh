#!/usr/bin/env bash
# media/ under AddressSanitizer (with LeakSanitizer) and UndefinedBehaviorSanitizer: builds a
# media-only tree with clang (no LibTorch, no gRPC), runs media_unit_tests (a shard a core) with
# leak checks and a cap on single allocations, then fuzzes DecodeClip and ImageFrameDecoder with
# libFuzzer for a bounded time each from seed corpora made here with the ffmpeg CLI, the HTTP
# door (tests/fuzz/http_door_fuzzer.cc) from raw requests, and the REST doors' JSON bodies
# (tests/fuzz/json_bodies_fuzzer.cc). Any test failure, sanitizer report,
# leak, crash or fuzzer timeout fails the script. `make sanitize` runs it; so does `make test`, as
# the test media_sanitizer beside the others.
#
# Environment: SANITIZE_BUILD_DIR (build-sanitize), FUZZ_SECONDS (60, DecodeClip),
# IMAGE_FUZZ_SECONDS (20, ImageFrameDecoder), HTTP_FUZZ_SECONDS (60, the HTTP door),
# JSON_FUZZ_SECONDS (60, the JSON bodies), FUZZ_SEED (1), JOBS (nproc), DETECT_LEAKS=0 to run where LeakSanitizer cannot (it needs ptrace), saying so
# loudly.
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${SANITIZE_BUILD_DIR:-build-sanitize}
fuzz_seconds=${FUZZ_SECONDS:-60}
image_fuzz_seconds=${IMAGE_FUZZ_SECONDS:-20}
http_fuzz_seconds=${HTTP_FUZZ_SECONDS:-60}
json_fuzz_seconds=${JSON_FUZZ_SECONDS:-60}
jobs=${JOBS:-$(nproc)}
# Debian bookworm's clang; its sanitizer and libFuzzer runtimes are in libclang-rt-14-dev.
cc=clang-14
cxx=clang++-14
llvm_bin=/usr/lib/llvm-14/bin

step() { echo "== media-sanitizer-check: $*"; }
total_start=$SECONDS
timings=()
timed() {  # timed NAME COMMAND...: runs COMMAND, keeps its time and exit status
  local name=$1 start=$SECONDS status=0
  shift
  "$@" || status=$?
  timings+=("$name: $((SECONDS - start)) s")
  return "$status"
}

# Reports name source lines only when the symbolizer is found.
if [ -x "$llvm_bin/llvm-symbolizer" ]; then export ASAN_SYMBOLIZER_PATH=$llvm_bin/llvm-symbolizer; fi

# LeakSanitizer stops the process's threads with ptrace; some containers forbid that, and then every
# leak check errors out. Find out first, with a program that leaks on purpose.
detect_leaks=${DETECT_LEAKS:-1}
if [ "$detect_leaks" = 1 ]; then
  probe=$(mktemp -d)
  printf '#include <stdlib.h>\nvoid *p;\nint main(void) { p = malloc(16); p = 0; return 0; }\n' \
    > "$probe/leak.c"
  "$cc" -fsanitize=address -g "$probe/leak.c" -o "$probe/leak"
  if ASAN_OPTIONS=detect_leaks=1 "$probe/leak" > "$probe/out" 2>&1 ||
    ! grep -q 'detected memory leaks' "$probe/out"; then
    cat "$probe/out" >&2
    echo "media-sanitizer-check: LeakSanitizer cannot run here (it needs ptrace; in Docker:" \
      "--cap-add SYS_PTRACE). Rerun with DETECT_LEAKS=0 to check all but leaks." >&2
    rm -rf "$probe"
    exit 1
  fi
  rm -rf "$probe"
else
  echo "media-sanitizer-check: WARNING: DETECT_LEAKS=0, leaks are NOT checked" >&2
fi

# Leaks fail; undefined behaviour halts (also -fno-sanitize-recover).
asan_options="detect_leaks=$detect_leaks:detect_stack_use_after_return=1:check_initialization_order=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

build_tree() {
  cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$cxx" \
    -DVIDCLF_MEDIA_ONLY=ON -DVIDCLF_SANITIZE=address,undefined
  # What runs here only: the media benchmarks would add a minute of compiling that the main build
  # does already.
  cmake --build "$build_dir" -j "$jobs" --target media_unit_tests decode_clip_fuzzer \
    image_frame_fuzzer http_door_fuzzer json_bodies_fuzzer
}
step "configure and build $build_dir (clang, address+undefined, media only)"
ASAN_OPTIONS=$asan_options timed build build_tree

# No single allocation may exceed 64 MiB (the test inputs are small), so that a header declaring
# huge frames cannot get memory for them even once, wherever the allocation comes from.
step "media_unit_tests under ASan/UBSan"
test_asan_options="$asan_options:max_allocation_size_mb=64:allocator_may_return_null=0"
# One process a core, each with its share of the tests (GoogleTest's sharding): a process per
# test, as ctest runs them, spent more time starting ASan and FFmpeg than testing (175 s against
# 97 s on two cores). The fuzzer runs even when a test fails: both results are worth having.
run_test_shards() {
  local status=0 pids=() shard
  for ((shard = 0; shard < jobs; shard++)); do
    GTEST_TOTAL_SHARDS=$jobs GTEST_SHARD_INDEX=$shard timeout 600 \
      "$build_dir/bin/media_unit_tests" > "$build_dir/media-tests-$shard.log" 2>&1 &
    pids+=("$!")
  done
  for shard in "${!pids[@]}"; do
    if ! wait "${pids[$shard]}"; then
      status=1
      tail -n 80 "$build_dir/media-tests-$shard.log" >&2
    fi
  done
  return "$status"
}
tests_status=0
ASAN_OPTIONS=$test_asan_options timed tests run_test_shards || tests_status=$?
if [ "$tests_status" -ne 0 ]; then
  # Allocation stacks (leaks, oversized allocations) stop at the first FFmpeg frame with the fast
  # unwinder, as Debian builds FFmpeg without frame pointers; the slow one costs twice the time.
  failed=$(sed -n 's/^\[  FAILED  \] \([^ ,]*\).*/\1/p' "$build_dir"/media-tests-*.log | sort -u |
    paste -sd: -)
  step "rerunning ${failed:-every test} with full allocation stacks"
  ASAN_OPTIONS="$test_asan_options:fast_unwind_on_malloc=0" "$build_dir/bin/media_unit_tests" \
    ${failed:+--gtest_filter="$failed"} 2>&1 | tail -n 120 >&2 || true
fi

step "seed corpora"
seeds=$build_dir/fuzz-seeds
image_seeds=$build_dir/image-fuzz-seeds
http_seeds=$build_dir/http-fuzz-seeds
json_seeds=$build_dir/json-fuzz-seeds
rm -rf "$seeds" "$image_seeds" "$http_seeds" "$json_seeds" "$build_dir"/*fuzz-corpus \
  "$build_dir"/*fuzz-artifacts
mkdir -p "$seeds" "$image_seeds" "$http_seeds" "$json_seeds"
seed() {  # seed NAME SIZE FRAMES FFMPEG_OUTPUT_ARGUMENTS...
  local name=$1 size=$2 frames=$3
  shift 3
  ffmpeg -nostdin -y -loglevel error -f lavfi -i "testsrc2=size=$size:rate=10" -frames:v "$frames" \
    "$@" "$seeds/$name"
}
make_seeds() {
  # Small files: libFuzzer mutates whole inputs, and short ones run fast.
  seed mpeg4.mp4 64x48 8 -c:v mpeg4 -g 3
  seed h264_moov_at_end.mp4 64x48 8 -c:v libx264 -bf 2 -g 4
  seed h264_faststart.mov 64x48 6 -c:v libx264 -g 3 -movflags +faststart
  seed h264_fragmented.mp4 64x48 8 -c:v libx264 -g 3 -movflags frag_keyframe+empty_moov
  seed h264.h264 64x48 6 -c:v libx264 -g 3 -f h264
  seed hevc.mkv 64x64 4 -c:v libx265 -x265-params log-level=error -g 2
  seed vp8.webm 64x48 6 -c:v libvpx -deadline realtime -cpu-used 8 -g 3
  seed vp9.mkv 64x48 6 -c:v libvpx-vp9 -deadline realtime -cpu-used 8 -g 3
  seed av1.mkv 64x64 3 -c:v libaom-av1 -cpu-used 8 -g 2
  seed mpeg2.ts 64x48 8 -c:v mpeg2video -g 3
  seed mpeg1.mpg 64x48 8 -c:v mpeg1video -r 25 -g 3 -f mpeg
  seed mjpeg.avi 32x24 4 -c:v mjpeg
  seed flv1.flv 64x48 6 -c:v flv1 -g 3
  seed theora.ogv 64x48 6 -c:v libtheora -g 3
  seed ffv1.nut 32x24 3 -c:v ffv1
  seed raw.y4m 16x16 2 -pix_fmt yuv420p
  seed anim.gif 32x24 3
  seed frame.png 32x24 1 -f image2pipe -c:v png
}
# The image fuzzer's first byte picks the path (image_frame_fuzzer.cc): 0 for an encoded picture,
# 1 for a raw RGB24 frame, then its width and height less one.
make_image_seeds() {
  local picture
  for picture in png:png jpeg:mjpeg; do
    { printf '\000'
      ffmpeg -nostdin -loglevel error -f lavfi -i testsrc2=size=32x24 -frames:v 1 \
        -f image2pipe -c:v "${picture#*:}" -
    } > "$image_seeds/${picture%%:*}"
  done
  { printf '\001\017\013'  # 16x12
    ffmpeg -nostdin -loglevel error -f lavfi -i testsrc2=size=16x12 -frames:v 1 \
      -f rawvideo -pix_fmt rgb24 -
  } > "$image_seeds/rgb24"
}
# The HTTP door fuzzer's first byte picks the door (http_door_fuzzer.cc): 0 without tokens, 1
# with tokens and an allowed origin; the rest is the connection's bytes. The requests of issue
# 80's report (each ended the server), and requests as the REST tests send them.
make_http_seeds() {
  local n=0 request door
  for request in \
    'GET /v2/health/live%FF HTTP/1.1\r\nHost: x\r\n\r\n' \
    'GET /v2/health/live\xff HTTP/1.1\r\nHost: x\r\n\r\n' \
    'OPTIONS /v2/models/demo/infer HTTP/1.1\r\nHost: x\r\nOrigin: http://a\xffb\r\nAccess-Control-Request-Method: POST\r\n\r\n' \
    'G\xffT /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n' \
    'GET /v2/models/%FF%FE HTTP/1.1\r\nHost: x\r\n\r\n' \
    'GET /v2/models/demo%00x HTTP/1.1\r\nHost: x\r\n\r\n' \
    'POST /v2/models/demo/classify?attention=%FF HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nabcd' \
    'POST /v1/sources?source_id=cam HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n\xff\xfe' \
    'GET /v1/sources?page_token=garbage-token HTTP/1.1\r\nHost: x\r\n\r\n' \
    'POST /v2/models/demo/infer HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer fuzzer-token-0123456789abcdef\r\nContent-Type: application/json\r\nContent-Length: 61\r\n\r\n{"inputs":[{"name":"VIDEO","shape":[1],"datatype":"BYTES"}]}' \
    'GET /v2/models/demo HTTP/1.1\r\nHost: x\r\nX-Anything: \xff\xfe\r\nAuthorization: Bearer \xff\r\n\r\n' \
    'OPTIONS /v2 HTTP/1.1\r\nHost: x\r\nOrigin: http://ok.example\r\nAccess-Control-Request-Method: GET\r\n\r\n' \
    'POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\n' \
    'GET /x HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n' \
    'GET /v2 HTTP/1.1\r\nHost: x\r\n\r\nGET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n'; do
    for door in '\000' '\001'; do
      printf '%b' "$door$request" > "$http_seeds/request-$((n += 1))"
    done
  done
}
# The JSON bodies fuzzer's first byte picks the body (json_bodies_fuzzer.cc): 0 an infer request,
# 2 one with binary tensors after a JSON of the length the next two bytes say, 1 a Source. The
# bodies the REST tests send, and issue 80's (the \xff\xfe Source ended the server).
make_json_seeds() {
  local n=0 body
  for body in \
    '\000{"inputs":[{"name":"VIDEO","shape":[4],"datatype":"BYTES","data":["AAAAGGZ0eXBpc29t"]}]}' \
    '\000{"id":"r1","inputs":[{"name":"URI","shape":[1],"datatype":"BYTES","data":["file:/videos/a.mp4"]}],"outputs":[{"name":"LABELS"},{"name":"SCORES","parameters":{"binary_data":true}},{"name":"FRAME_TIMES"}],"parameters":{"top_k":3,"attention":"linear","sampling":"uniform","num_frames":8}}' \
    '\000{"inputs":[{"name":"VIDEO","shape":[3],"datatype":"UINT8","data":[0,1,255]}],"parameters":{"binary_data_output":true}}' \
    '\002\x60\000{"inputs":[{"name":"VIDEO","shape":[1],"datatype":"BYTES","parameters":{"binary_data_size":8}}]}\004\000\000\000abcd' \
    '\000{"id":"\xff","inputs":[]}' \
    '\001{"uri":"rtsp://camera.lan:554/porch","labels":{"site":"north"},"stall_timeout_seconds":2,"max_reconnects":3,"config":{"model":"demo","top_k":3,"emit_every_frames":4}}' \
    '\001{"uri":"file:/videos/a.mp4","input_options":{"rtsp_transport":"tcp"},"checkpoint_interval_seconds":10,"max_resume_gap_seconds":120,"paused":true}' \
    '\001{"uri":"rtsp://camera.lan:554/\xff","labels":{"s\xfe":"p"}}' \
    '\001\xff\xfe'; do
    printf '%b' "$body" > "$json_seeds/body-$((n += 1))"
  done
}
timed seeds make_seeds
timed image_seeds make_image_seeds
timed http_seeds make_http_seeds
timed json_seeds make_json_seeds
echo "   $(ls "$seeds" | wc -l) + $(ls "$image_seeds" | wc -l) + $(ls "$http_seeds" | wc -l) +" \
  "$(ls "$json_seeds" | wc -l) seeds, $(du -sk "$seeds" "$image_seeds" "$http_seeds" "$json_seeds" |
    awk '{ k += $1 } END { print k }') KiB"

# run_fuzzer NAME SECONDS SEED_DIR OUTPUT: runs $build_dir/bin/NAME from the seeds with a fixed
# random seed, so that every machine makes the same mutations (a slower one stops earlier), growing
# $build_dir/OUTPUT-corpus and writing failing inputs to OUTPUT-artifacts, its log to OUTPUT.log.
# Allocations are capped by -rss_limit_mb (-malloc_limit_mb defaults to it). On a failure it reruns
# each failing input with full allocation stacks. Further arguments go to the fuzzer. Returns the
# fuzzer's exit status.
run_fuzzer() {
  local name=$1 seconds=$2 seed_dir=$3 status=0
  local corpus=$build_dir/$4-corpus artifacts=$build_dir/$4-artifacts log=$build_dir/$4.log
  shift 4
  mkdir -p "$corpus" "$artifacts"
  ASAN_OPTIONS=$asan_options "$build_dir/bin/$name" -seed="${FUZZ_SEED:-1}" \
    -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "$@" "$corpus" "$seed_dir" > "$log" 2>&1 || status=$?
  grep -E '^#[0-9]+ +DONE|^stat::' "$log" || true
  if [ "$status" -ne 0 ]; then
    tail -n 60 "$log" >&2
    for input in "$artifacts"/*; do
      [ -f "$input" ] || continue
      step "rerunning $input with full allocation stacks"
      ASAN_OPTIONS="$asan_options:fast_unwind_on_malloc=0" "$build_dir/bin/$name" \
        -rss_limit_mb=2048 -timeout=10 "$input" 2>&1 | tail -n 60 >&2 || true
    done
    echo "media-sanitizer-check: $name failed (exit $status); inputs in $artifacts," \
      "reproduce with $build_dir/bin/$name FILE; full log $log" >&2
  fi
  return "$status"
}

# Each fuzzer runs on one thread: DecodeClip's beside ImageFrameDecoder's, then the HTTP door's,
# then the JSON bodies'.
fuzz_both() {
  local status=0 decode_pid image_pid
  run_fuzzer decode_clip_fuzzer "$fuzz_seconds" "$seeds" fuzz &
  decode_pid=$!
  (
    second=0
    run_fuzzer image_frame_fuzzer "$image_fuzz_seconds" "$image_seeds" image-fuzz || second=$?
    run_fuzzer http_door_fuzzer "$http_fuzz_seconds" "$http_seeds" http-fuzz || second=$?
    run_fuzzer json_bodies_fuzzer "$json_fuzz_seconds" "$json_seeds" json-fuzz \
      -dict=tests/fuzz/json_bodies.dict || second=$?
    exit "$second"
  ) &
  image_pid=$!
  wait "$decode_pid" || status=$?
  wait "$image_pid" || status=$?
  return "$status"
}
step "fuzz DecodeClip for $fuzz_seconds s beside ImageFrameDecoder for $image_fuzz_seconds s, then the HTTP door for $http_fuzz_seconds s and the JSON bodies for $json_fuzz_seconds s"
fuzz_status=0
timed fuzz fuzz_both || fuzz_status=$?
if [ "$tests_status" -ne 0 ]; then
  echo "media-sanitizer-check: media_unit_tests failed under ASan/UBSan (see above)" >&2
fi

result=passed
if [ "$tests_status" -ne 0 ] || [ "$fuzz_status" -ne 0 ]; then result=FAILED; fi
step "$result in $((SECONDS - total_start)) s (${timings[*]})"
[ "$result" = passed ]
