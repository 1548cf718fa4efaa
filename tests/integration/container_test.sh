#!/usr/bin/env bash
# The CPU image, built and run, then the compose stack. No registry is reachable, so the base
# image is made from Debian's packages with debootstrap (scripts/make-base-image.sh);
# deploy/docker/Dockerfile's runtime stage is built over the executables `make build` made
# (BINARIES=prebuilt); then the server runs in a container with a read-only root filesystem. Its
# HEALTHCHECK turns healthy, a call from the host is answered, /metrics counts it, it runs as uid
# 10001, its log is one JSON object per line, and `docker stop` drains it to exit 0. Last,
# docker-compose (Debian's 1.29) brings up docker-compose.yml's vidclf and Prometheus, the latter
# built from Debian's package (deploy/docker/Dockerfile.prometheus), and Prometheus scrapes the
# server. Grafana, which has no Debian package, is only validated (scripts/check-deploy.sh).
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
PROMETHEUS_IMAGE=vidclf-prometheus:container-test
CONTAINER="vidclf-container-test-$$"
PROJECT="vidclf-container-test-$$"
WORK="$(mktemp -d)"
DOCKERD_PID=""
compose() { docker-compose -p "$PROJECT" --project-directory "$ROOT" -f "$WORK/compose.yml" "$@"; }
cleanup() {
  "$DOCKER" rm -f "$CONTAINER" >/dev/null 2>&1 || true
  [ -f "$WORK/compose.yml" ] && compose down -v -t 5 >/dev/null 2>&1 || true
  if [ -n "$DOCKERD_PID" ]; then kill "$DOCKERD_PID" 2>/dev/null && wait "$DOCKERD_PID" || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "container_test: FAIL: $*" >&2; exit 1; }
# Prints the health of container $1 once it is healthy, or after 90 s.
wait_healthy() {
  local health=""
  for _ in $(seq 90); do
    health="$("$DOCKER" inspect -f '{{.State.Health.Status}}' "$1")"
    [ "$health" = healthy ] && break
    sleep 1
  done
  echo "$health"
}

# ---- `make up`'s checks (scripts/compose.sh), which need no daemon: one that cannot be reached
# is named as not running, not answered with docker-compose's traceback
if message="$(DOCKER_HOST=unix://"$WORK/no-daemon.sock" "$ROOT/scripts/compose.sh" config -q 2>&1)"
then
  fail "compose.sh went on without a daemon"
fi
grep -q "the Docker daemon is not running: start it" <<<"$message" \
  || fail "compose.sh without a daemon said: $message"

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
DOCKER="$DOCKER" "$ROOT/scripts/make-base-image.sh" "$BASE_IMAGE" || fail "the base image"

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
health="$(wait_healthy "$CONTAINER")"
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

# ---- the compose stack: docker-compose.yml's vidclf and Prometheus as the file writes them, but
# for the images (this test's, through the file's own variables) and the host ports (ephemeral,
# on loopback: the fixed ones may be taken on a machine that runs tests)
"$DOCKER" build -q -f "$ROOT/deploy/docker/Dockerfile.prometheus" \
  --build-arg BASE_IMAGE="$BASE_IMAGE" -t "$PROMETHEUS_IMAGE" "$ROOT/deploy/docker" \
  >"$WORK/prometheus-build.log" 2>&1 \
  || { tail -20 "$WORK/prometheus-build.log"; fail "the Prometheus image"; }
VIDCLF_IMAGE="$IMAGE" PROMETHEUS_IMAGE="$PROMETHEUS_IMAGE" \
  docker-compose --project-directory "$ROOT" -f "$ROOT/docker-compose.yml" config \
  >"$WORK/resolved.yml" || fail "docker-compose config"
/usr/bin/python3 - "$WORK/resolved.yml" "$WORK/compose.yml" <<'PY'
import sys, yaml
config = yaml.safe_load(open(sys.argv[1]))
config["services"] = {name: config["services"][name] for name in ("vidclf", "prometheus")}
for service in config["services"].values():
    service.pop("build", None)
    service["ports"] = [f"127.0.0.1::{port['target']}" for port in service["ports"]]
config["volumes"] = {"prometheus-data": {}}
yaml.safe_dump(config, open(sys.argv[2], "w"))
PY
compose up -d --no-build >"$WORK/compose-up.log" 2>&1 \
  || { cat "$WORK/compose-up.log"; fail "docker-compose up"; }
server="$(compose ps -q vidclf)"
health="$(wait_healthy "$server")"
[ "$health" = healthy ] || { compose logs; fail "compose's vidclf: $health after 90 s"; }
grpc="$(compose port vidclf 50051)"
prometheus="$(compose port prometheus 9090)"
"$BUILD_DIR/bin/vidclf" classify "$sample" --server "$grpc" >/dev/null \
  || fail "classify through compose's vidclf at $grpc"
# Prometheus finds the server by compose's DNS and scrapes it every 15 s (its prometheus.yml).
/usr/bin/python3 - "$prometheus" <<'PY' || { compose logs prometheus | tail -20; fail "no scrape"; }
import json, sys, time, urllib.parse, urllib.request
query = 'vidclf_requests_total{job="vidclf",method="Classify",code="OK"}'
url = f"http://{sys.argv[1]}/api/v1/query?" + urllib.parse.urlencode({"query": query})
deadline = time.monotonic() + 120
while True:
    try:
        result = json.load(urllib.request.urlopen(url, timeout=5))["data"]["result"]
    except OSError:
        result = []
    if result and float(result[0]["value"][1]) == 1:
        break
    if time.monotonic() > deadline:
        sys.exit(f"Prometheus answers {query} with {result} after 120 s")
    time.sleep(1)
PY
compose stop -t 40 vidclf >/dev/null 2>&1
code="$("$DOCKER" inspect -f '{{.State.ExitCode}}' "$server")"
[ "$code" = 0 ] || { compose logs vidclf; fail "compose's vidclf exited $code when stopped"; }
echo "container_test: ok: docker-compose $(docker-compose version --short) brought up vidclf and" \
  "Prometheus, Prometheus scraped the call, vidclf drained to exit 0"
