#!/usr/bin/env bash
# Builds the default model repository exactly as `make serve` does and checks what the README
# promises of it: every clip model's recorded test accuracy is at least 0.9, and a real server on
# the repository, asked through the real client, classifies at least 9 of the 10 sample clips (one
# per class) right with each, with the backbone in fp32, and in bf16 and int8 where the CPU
# has their instructions. The segmentation model's recorded test frame accuracy is at least 65%,
# and the server's segments of its test timelines (ClassifySegments, per frame) score within 3
# points of it. With KEEP_DIR, the repository and samples are left there (KEEP_DIR/repo,
# KEEP_DIR/samples) for the docs test to serve, as `make serve` would.
#
# The repository is the same work from run to run while the trainer's code is: a repository that
# passed every check here is kept in a cache (VIDCLF_REPOSITORY_CACHE, by default
# ~/.cache/vidclf/demo-repository; "off" builds from nothing every time), under a key of
# everything it was made from: the sources vidclf-train is built from and this script, the
# compiler, the build type, the Debian packages of every library vidclf-train loads, and the CPU
# (whose instructions choose the backbone's kernels). A run with the same key serves that
# repository instead of training it again; every check of a server on it runs all the same. The
# checks of the trainer's own output (embed's resumption) ran when the entry was made, on the
# same code.
#
# usage: demo_model_test.sh BUILD_REPOSITORY_SCRIPT BIN_DIR [KEEP_DIR]
set -euo pipefail
build_repository=$1
bin_dir=$2
keep_dir=${3:-}
models=(demo demo-transformer demo-causal)
labels=(fade_in fade_out hue_forward hue_backward zoom_in zoom_out flicker_slow flicker_fast
  focus_in focus_out)
min_accuracy=0.9
min_samples_right=9
min_frame_accuracy=65

dir=$(mktemp -d)
server_pid=
cleanup() {
  # Stops the server if a check failed while it ran, then removes everything the test made.
  if [ -n "$server_pid" ]; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$dir"
}
trap cleanup EXIT

# The cache key (see above); a sha256.
repository_key() {
  local source libraries
  source=$(cd "$(dirname "$build_repository")/.." && pwd)
  libraries=$(ldd "$bin_dir/vidclf-train" | awk '/=>/ {print $3}' | xargs realpath)
  {
    git -C "$source" ls-files -z -- common media model pipeline proto train CMakeLists.txt \
      scripts/build-model-repository.sh tests/integration/demo_model_test.sh |
      (cd "$source" && xargs -0 sha256sum)
    c++ --version | head -1
    grep -E '^CMAKE_(BUILD_TYPE|CXX_FLAGS[A-Z_]*):' "$bin_dir/../CMakeCache.txt" || true
    # Debian's usrmerge lists a library under /usr/lib or /lib: both are asked.
    # shellcheck disable=SC2086,SC2046,SC2016 # one path a word; dpkg-query's own ${fields}
    {
      dpkg-query -S $libraries
      dpkg-query -S $(printf '%s\n' $libraries | sed 's|^/usr||')
    } 2>/dev/null | cut -d: -f1 | sort -u |
      xargs dpkg-query -W -f '${Package}=${Version}\n'
    grep -m 2 -E '^(model name|flags)' /proc/cpuinfo
  } | sha256sum | cut -d' ' -f1
}

start=$(date +%s)
cache_root=${VIDCLF_REPOSITORY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vidclf/demo-repository}
entry=
cached=0
if [ "$cache_root" != off ]; then
  entry="$cache_root/$(repository_key)"
  if [ -f "$entry/complete" ]; then
    cp -r "$entry/repo" "$entry/samples" "$dir/"
    mkdir -p "$dir/work/timelines"
    cp -r "$entry/test-timelines" "$dir/work/timelines/test"
    cached=1
    echo "demo model repository from the cache ($entry), made by the same code and libraries"
  fi
fi
if [ "$cached" -eq 0 ]; then
  "$build_repository" "$bin_dir" "$dir/repo" "$dir/work" "$dir/samples"
  echo "demo model repository built in $(($(date +%s) - start)) s"
fi

# The trainer's own checks, on the work directory it made: in a cached run they passed when the
# entry was made, by the same code.
if [ "$cached" -eq 0 ]; then
  # embed finds synth's split lists beside the videos by itself (the script names them), and
  # refuses a work directory that was embedded with another split: the same videos without their
  # lists, split by directory order.
  embed_output=$("$bin_dir/vidclf-train" embed --data "$dir/work/data/videos" \
    --work "$dir/work/embeddings" 2>&1)
  grep -q "using the split lists beside the videos" <<<"$embed_output"
  grep -q "embedded 0 clips" <<<"$embed_output"
  mkdir "$dir/bare"
  ln -s "$dir/work/data/videos" "$dir/bare/videos"
  if embed_output=$("$bin_dir/vidclf-train" embed --data "$dir/bare/videos" \
    --work "$dir/work/embeddings" 2>&1); then
    echo "FAIL: embed re-split a work directory: $embed_output"
    exit 1
  fi
  grep -q "was embedded with another split" <<<"$embed_output"
fi

failed=0
for name in "${models[@]}"; do
  accuracy=$(/usr/bin/python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["metrics"]["accuracy"])' "$dir/repo/$name/1/model.json")
  echo "$name: test accuracy $accuracy"
  if ! awk -v a="$accuracy" -v m="$min_accuracy" 'BEGIN { exit !(a >= m) }'; then
    echo "FAIL: $name's test accuracy $accuracy is below $min_accuracy"
    failed=1
  fi
done
grep -q '"clustered"' "$dir/repo/demo-transformer/1/model.json"
frame_accuracy() { # the "frame_accuracy" of a JSON file's "metrics" object, or of the file
  /usr/bin/python3 -c 'import json, sys
data = json.load(open(sys.argv[1]))
print(data.get("metrics", data)["frame_accuracy"])' "$1"
}
recorded=$(frame_accuracy "$dir/repo/demo-segments/1/model.json")
echo "demo-segments: test frame accuracy $recorded"
if ! awk -v a="$recorded" -v m="$min_frame_accuracy" 'BEGIN { exit !(a >= m) }'; then
  echo "FAIL: demo-segments' test frame accuracy $recorded is below $min_frame_accuracy"
  failed=1
fi

samples=()
for label in "${labels[@]}"; do
  # Exactly one sample per class (the README names them SAMPLES/<class>.mp4).
  sample=("$dir/samples/$label".*)
  if [ "${#sample[@]}" -ne 1 ] || [ ! -f "${sample[0]}" ]; then
    echo "FAIL: expected one sample of $label in $dir/samples, found: ${sample[*]}"
    exit 1
  fi
  samples+=("${sample[0]}")
done

# A real server on the repository in each precision, on loopback and free ports; it prints the
# port it took. Each precision must classify as many samples right as fp32 must; bf16 and int8
# are skipped, with the server's reason, on a CPU without their instructions.
for precision in fp32 bf16 int8; do
  "$bin_dir/vidclf-server" --model-repository "$dir/repo" --host 127.0.0.1 --grpc-port 0 \
    --metrics-port 0 --precision "$precision" >"$dir/server.out" 2>"$dir/server.err" &
  server_pid=$!
  port=
  for _ in $(seq 600); do
    port=$(sed -n 's/.*gRPC listening on [^ ]*:\([0-9][0-9]*\).*/\1/p' "$dir/server.out")
    if [ -n "$port" ] || ! kill -0 "$server_pid" 2>/dev/null; then break; fi
    sleep 0.1
  done
  if [ -z "$port" ]; then
    if [ "$precision" != fp32 ] && grep -q "instructions" "$dir/server.err" "$dir/server.out"; then
      echo "SKIP $precision: $(grep -h "instructions" "$dir/server.err" "$dir/server.out" | head -1)"
      wait "$server_pid" 2>/dev/null || true
      server_pid=
      continue
    fi
    echo "FAIL: the server ($precision) did not say where it listens; its output:"
    cat "$dir/server.out" "$dir/server.err"
    exit 1
  fi

  if [ "$precision" = fp32 ]; then
    ls "$dir"/work/timelines/test/*.mp4 >"$dir/timelines.txt"
    "$bin_dir/vidclf" classify --from-list "$dir/timelines.txt" --segments --model demo-segments \
      --server "127.0.0.1:$port" --output "$dir/segments.jsonl"
    "$bin_dir/vidclf-train" eval --segments --truth "$dir/work/timelines/test/truth.json" \
      --predicted "$dir/segments.jsonl" --json >"$dir/segments-score.json"
    served=$(frame_accuracy "$dir/segments-score.json")
    echo "demo-segments served: test frame accuracy $served (recorded $recorded)"
    if ! awk -v a="$served" -v b="$recorded" 'BEGIN { d = a - b; exit !(d < 3 && d > -3) }'; then
      echo "FAIL: the server's segments score $served, the recorded evaluation $recorded"
      failed=1
    fi
  fi
  for name in "${models[@]}"; do
    right=0
    for sample in "${samples[@]}"; do
      label=$(basename "${sample%.*}")
      # The client's --json answer: {"model": ..., "top_k": [{"label": ..., "score": ...}, ...]}.
      answer=$("$bin_dir/vidclf" classify "$sample" --server "127.0.0.1:$port" --model "$name" \
        --top-k 1 --json)
      read -r model predicted score < <(/usr/bin/python3 -c 'import json, sys
answer = json.loads(sys.argv[1])
print(answer["model"], answer["top_k"][0]["label"], answer["top_k"][0]["score"])' "$answer")
      if [ "$model" != "$name" ]; then
        echo "FAIL: asked for $name, answered by $model"
        exit 1
      fi
      if [ "$predicted" = "$label" ]; then
        verdict=right
        right=$((right + 1))
      else
        verdict=WRONG
      fi
      echo "$name ($precision): $(basename "$sample") -> $predicted $score ($verdict)"
    done
    echo "$name ($precision): $right of ${#samples[@]} samples right"
    if [ "$right" -lt "$min_samples_right" ]; then
      echo "FAIL: $name classified $right of ${#samples[@]} samples right in $precision, fewer" \
        "than $min_samples_right"
      failed=1
    fi
  done

  # SIGTERM drains the server; it should then exit cleanly.
  kill -TERM "$server_pid"
  status=0
  wait "$server_pid" || status=$?
  server_pid=
  if [ "$status" -ne 0 ]; then
    echo "FAIL: the server ($precision) exited with status $status after SIGTERM; its log:"
    cat "$dir/server.err"
    failed=1
  fi
done
echo "demo model test took $(($(date +%s) - start)) s"
if [ "$failed" -ne 0 ]; then exit 1; fi
# Every check passed: the repository is kept for the next run with the same key, alone in the
# cache (an entry is about 180 MB). Copied aside first, then renamed, so that a run beside this
# one never finds half an entry.
if [ -n "$entry" ] && [ "$cached" -eq 0 ]; then
  mkdir -p "$cache_root"
  rm -rf "${cache_root:?}"/*
  partial=$(mktemp -d "$cache_root/.partial.XXXXXX")
  cp -r "$dir/repo" "$dir/samples" "$partial/"
  cp -r "$dir/work/timelines/test" "$partial/test-timelines"
  touch "$partial/complete"
  mv "$partial" "$entry"
fi
if [ -n "$keep_dir" ]; then
  rm -rf "$keep_dir"
  mkdir -p "$keep_dir"
  mv "$dir/repo" "$dir/samples" "$keep_dir/"
fi
