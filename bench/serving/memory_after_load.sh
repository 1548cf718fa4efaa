#!/usr/bin/env bash
# Resident memory of vidclf-server idle, right after a load, and 10 s later: the measurement
# behind the allocator choice in server/idle_memory_releaser.h.
#
#   bench/serving/memory_after_load.sh LABEL REPOSITORY VIDEO... [-- ENV=VALUE...]
#
# e.g. ... glibc build/model-repository a.mp4 b.mp4, or with "-- LD_PRELOAD=libjemalloc.so.2"
# to try another allocator. Loads the server with 48 Classify calls at concurrency 16 and prints
# one line: LABEL idle=MB after=MB after10s=MB, then vidclf bench's row.
set -euo pipefail
cd "$(dirname "$0")/../.."
label=$1 repository=$2
shift 2
videos=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do videos+=("$1"); shift; done
[ $# -gt 0 ] && shift
grpc_port=${GRPC_PORT:-50990} metrics_port=${METRICS_PORT:-50991}
env "$@" build/bin/vidclf-server --model-repository "$repository" --host 127.0.0.1 \
  --grpc-port "$grpc_port" --metrics-port "$metrics_port" > /dev/null 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
sleep 4
rss() {
  /usr/bin/python3 -c "import urllib.request, re
page = urllib.request.urlopen('http://127.0.0.1:$metrics_port/metrics').read().decode()
print(round(float(re.search(r'^process_resident_memory_bytes (\S+)', page, re.M).group(1)) / 1e6))"
}
idle=$(rss)
row=$(build/bin/vidclf bench "${videos[@]}" --server "127.0.0.1:$grpc_port" --concurrency 16 \
  --requests 48 --metrics-url "http://127.0.0.1:$metrics_port/metrics" | tail -1)
after=$(rss)
sleep 10
echo "$label idle=${idle}MB after=${after}MB after10s=$(rss)MB  $row"
