#!/usr/bin/env bash
# The CPU image, built and run. No registry is reachable, so the base image is made from Debian's
# packages with debootstrap; deploy/docker/Dockerfile's runtime stage is built over the
# executables `make build` made (BINARIES=prebuilt); then the server runs in a container with a
# read-only root filesystem. Its HEALTHCHECK turns healthy, a call from the host is answered,
# /metrics counts it, it runs as uid 10001, its log is one JSON object per line, and
# `docker stop` drains it to exit 0.
#
#   container_test.sh BUILD_DIR
#
# Exit 77 (ctest: skipped) when no container engine can run here, saying why.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_DIR="$(cd "$1" && pwd)"
# Debian's docker.io client: it builds with BuildKit without the buildx plugin.
DOCKER=/usr/bin/docker
BASE_IMAGE=vidclf-base:bookworm
IMAGE=vidclf-server:container-test
CONTAINER="vidclf-container-test-$$"
WORK="$(mktemp -d)"
DOCKERD_PID=""
cleanup() {
  "$DOCKER" rm -f "$CONTAINER" >/dev/null 2>&1 || true
  if [ -n "$DOCKERD_PID" ]; then kill "$DOCKERD_PID" 2>/dev/null && wait "$DOCKERD_PID" || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "container_test: FAIL: $*" >&2; exit 1; }

# ---- a container engine: the running one, or a dockerd started for the test
if ! "$DOCKER" info >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ] || ! command -v dockerd >/dev/null; then
    echo "container_test: skipped: no Docker daemon runs, and this user cannot start one"
    exit 77
  fi
  dockerd >"$WORK/dockerd.log" 2>&1 &
  DOCKERD_PID=$!
  for _ in $(seq 60); do "$DOCKER" info >/dev/null 2>&1 && break; sleep 0.5; done
  if ! "$DOCKER" info >/dev/null 2>&1; then
    echo "container_test: skipped: dockerd does not start here:"
    tail -5 "$WORK/dockerd.log"
    exit 77
  fi
fi

# ---- the base image, from Debian's packages (kept between runs)
if ! "$DOCKER" image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  echo "container_test: debootstrap bookworm into $BASE_IMAGE"
  debootstrap --variant=minbase bookworm "$WORK/rootfs" http://deb.debian.org/debian \
    >"$WORK/debootstrap.log" 2>&1 || { tail -20 "$WORK/debootstrap.log"; fail "debootstrap"; }
  tar -C "$WORK/rootfs" -c . | "$DOCKER" import - "$BASE_IMAGE" >/dev/null
  rm -rf "$WORK/rootfs"
fi

# ---- the image: the Dockerfile's runtime stage over this build's executables and a small model
context="$WORK/context"
mkdir -p "$context/out/bin" "$context/deploy/docker"
cp "$BUILD_DIR/bin/vidclf-server" "$BUILD_DIR/bin/vidclf" "$context/out/bin/"
cp "$ROOT/deploy/docker/runtime-packages.txt" "$context/deploy/docker/"
"$BUILD_DIR/bin/vidclf-train" all --synthesize --data "$WORK/data" --work "$WORK/train" \
  --run small --output-repository "$context/out/models" --samples-dir "$WORK/samples" \
  --videos-per-class 4 --epochs 2 --num-frames 4 --crop-size 32 --resize-shorter-side 32 \
  >"$WORK/train.log" 2>&1 || { cat "$WORK/train.log"; fail "vidclf-train"; }
sample=$(ls "$WORK"/samples/fade_in.*)
echo "container_test: building $IMAGE"
DOCKER_BUILDKIT=1 "$DOCKER" build --progress plain -f "$ROOT/deploy/docker/Dockerfile" \
  --build-arg BINARIES=prebuilt --build-arg RUNTIME_IMAGE="$BASE_IMAGE" -t "$IMAGE" "$context" \
  >"$WORK/build.log" 2>&1 || { tail -40 "$WORK/build.log"; fail "docker build"; }

# ---- the server in a container
"$DOCKER" run -d --name "$CONTAINER" --read-only --tmpfs /tmp -p 127.0.0.1::50051 \
  -p 127.0.0.1::9464 "$IMAGE" --cores 1 >/dev/null
grpc="$("$DOCKER" port "$CONTAINER" 50051/tcp | head -n1)"
metrics="$("$DOCKER" port "$CONTAINER" 9464/tcp | head -n1)"
health=""
for _ in $(seq 90); do
  health="$("$DOCKER" inspect -f '{{.State.Health.Status}}' "$CONTAINER")"
  [ "$health" = healthy ] && break
  sleep 1
done
[ "$health" = healthy ] || { "$DOCKER" logs "$CONTAINER"; fail "HEALTHCHECK: $health after 90 s"; }

output="$("$BUILD_DIR/bin/vidclf" classify "$sample" --json --server "$grpc")" \
  || fail "classify through $grpc: $output"
grep -q '"model":"small"' <<<"$output" || fail "unexpected answer: $output"
page="$(/usr/bin/python3 -c 'import sys, urllib.request
print(urllib.request.urlopen(f"http://{sys.argv[1]}/metrics", timeout=10).read().decode())' \
  "$metrics")"
grep -q 'vidclf_requests_total{code="OK",method="Classify",model="small"} 1' <<<"$page" \
  || fail "/metrics does not count the call"
user="$("$DOCKER" exec "$CONTAINER" id -u)"
[ "$user" = 10001 ] || fail "the server runs as uid $user, not 10001"
if "$DOCKER" exec -u 0 "$CONTAINER" touch /written 2>/dev/null; then
  fail "the root filesystem is writable: the server was not tested read-only"
fi

"$DOCKER" stop -t 40 "$CONTAINER" >/dev/null
code="$("$DOCKER" inspect -f '{{.State.ExitCode}}' "$CONTAINER")"
"$DOCKER" logs "$CONTAINER" >"$WORK/server.log" 2>&1
[ "$code" = 0 ] || { cat "$WORK/server.log"; fail "exit code $code after docker stop"; }
/usr/bin/python3 - "$WORK/server.log" <<'EOF' || fail "the log is not one JSON object per line"
import json, sys
lines = [line for line in open(sys.argv[1]) if line.strip()]
events = [json.loads(line) for line in lines]
assert all({"time", "level", "message"} <= event.keys() for event in events)
assert any(event["message"].startswith("draining") for event in events)
assert events[-1]["message"] == "stopped"
EOF
size="$("$DOCKER" image inspect -f '{{.Size}}' "$IMAGE")"
echo "container_test: ok: healthy, answered, counted, uid 10001, read-only, JSON log, drained" \
  "to exit 0; image $((size / 1000000)) MB"
