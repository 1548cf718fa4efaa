#!/usr/bin/env bash
# Offline validation of the deployment files: Dockerfiles, docker-compose.yml, Prometheus
# configuration and rules, the Grafana dashboard, and the Kubernetes manifests rendered by
# kustomize and checked against the Kubernetes schemas. No container engine, cluster or network
# is needed once the prerequisites below are installed.
#
#   scripts/check-deploy.sh [--build-dir DIR]
#
# Prerequisites: scripts/install-deps.sh installs them (kubectl, yamllint, docker-compose,
# promtool, Node.js and npm, readelf; and `npm ci` of deploy/validate/package-lock.json). This
# script installs nothing.
#
# With executables in the build directory (default build/), every flag the files pass is checked
# against their --help, and runtime-packages.txt against the libraries they link. Set
# VIDCLF_EXTRA_KUBECTL to a second kubectl (another kustomize version) to render with both.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) BUILD_DIR="$(cd "$2" && pwd)"; shift 2 ;;
    *) echo "usage: $0 [--build-dir DIR]" >&2; exit 2 ;;
  esac
done
cd "$ROOT" || exit 2
VALIDATE_DIR="$ROOT/deploy/validate"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# ---------------------------------------------------------------- steps
passed=0
failed=0
failures=()
# step NAME COMMAND...: runs it with its output kept; prints the output only when it fails.
step() {
  local name="$1"; shift
  local log="$WORK/step.log"
  if "$@" >"$log" 2>&1; then
    passed=$((passed + 1))
    printf 'ok    %s\n' "$name"
    grep -E '^(validate|note|SUCCESS)' "$log" | sed 's/^/      /' | head -5
  else
    failed=$((failed + 1))
    failures+=("$name")
    printf 'FAIL  %s\n' "$name"
    sed 's/^/      /' "$log" | tail -60
  fi
}
need() {
  command -v "$1" >/dev/null 2>&1 && return 0
  echo "$1 is not installed (run scripts/install-deps.sh)"
  return 1
}

# ---- YAML style
yaml_files() { find deploy -path deploy/validate/node_modules -prune -o \
  \( -name '*.yml' -o -name '*.yaml' \) -print; echo docker-compose.yml; }
lint_yaml() {
  need yamllint || return 1
  # shellcheck disable=SC2046
  yamllint --strict -c deploy/.yamllint $(yaml_files)
}
step "yamllint (deploy/, docker-compose.yml)" lint_yaml

# ---- Kubernetes: render with every kubectl there is, then validate
TARGETS=(base overlays/cpu overlays/gpu overlays/tls overlays/init-models batch prometheus-adapter)
KUBECTLS=()
command -v kubectl >/dev/null 2>&1 && KUBECTLS+=("$(command -v kubectl)")
if [ -n "${VIDCLF_EXTRA_KUBECTL:-}" ]; then KUBECTLS+=("$VIDCLF_EXTRA_KUBECTL"); fi
MANIFEST_ARGS=()
SELFTEST_ARGS=()
render() {
  local kubectl="$1" label="$2" target name out status=0
  mkdir -p "$WORK/$label"
  for target in "${TARGETS[@]}"; do
    name="$(basename "$target")"
    out="$WORK/$label/$name.yaml"
    if ! "$kubectl" kustomize "deploy/k8s/$target" >"$out" 2>"$out.err"; then
      echo "kubectl kustomize deploy/k8s/$target failed:"; cat "$out.err"; status=1; continue
    fi
    # kustomize v5 warns that `bases` and `patchesStrategicMerge` are deprecated; they stay
    # because kubectl 1.20's kustomize knows nothing newer. Any other message is shown.
    grep -v -e "is deprecated. Please use" "$out.err" || true
  done
  return "$status"
}
if [ ${#KUBECTLS[@]} -eq 0 ]; then
  step "kubectl kustomize" need kubectl
else
  for k in "${KUBECTLS[@]}"; do
    version="$("$k" version --client 2>/dev/null | grep -oE 'v1\.[0-9]+' | head -n1)"
    label="kubectl-${version:-unknown}"
    kustomize_version="$("$k" version --client 2>/dev/null | grep -oiE 'kustomize version: *v[0-9.]+' \
      | grep -oE 'v[0-9.]+')"
    step "kubectl ${version:-?} kustomize${kustomize_version:+ $kustomize_version} (${TARGETS[*]})" \
      render "$k" "$label"
    for target in "${TARGETS[@]}"; do
      name="$(basename "$target")"
      MANIFEST_ARGS+=(--manifests "$name@$label=$WORK/$label/$name.yaml")
      [ ${#SELFTEST_ARGS[@]} -lt $((2 * ${#TARGETS[@]})) ] \
        && SELFTEST_ARGS+=(--manifests "$name@$label=$WORK/$label/$name.yaml")
    done
  done
fi

# deploy/kserve/ is applied file by file (the canary updates the CPU InferenceService).
for pair in runtime=servingruntime cpu=inferenceservice-cpu gpu=inferenceservice-gpu \
  grpc=inferenceservice-grpc canary=inferenceservice-canary; do
  MANIFEST_ARGS+=(--manifests "kserve-${pair%%=*}=deploy/kserve/${pair#*=}.yaml")
  SELFTEST_ARGS+=(--manifests "kserve-${pair%%=*}=deploy/kserve/${pair#*=}.yaml")
done

node_ready() {
  need node || return 1
  [ -d "$VALIDATE_DIR/node_modules/kubernetes-models" ] && return 0
  echo "deploy/validate/node_modules is missing: run scripts/install-deps.sh (npm ci)"
  return 1
}
HELP_ARGS=()
help_texts() {
  mkdir -p "$WORK/help"
  "$BUILD_DIR/bin/vidclf-server" --help >"$WORK/help/vidclf-server.txt" 2>&1 \
    && "$BUILD_DIR/bin/vidclf" classify --help >"$WORK/help/vidclf-classify.txt" 2>&1 \
    && "$BUILD_DIR/bin/vidclf" health --help >"$WORK/help/vidclf-health.txt" 2>&1
}
if [ -x "$BUILD_DIR/bin/vidclf-server" ] && [ -x "$BUILD_DIR/bin/vidclf" ]; then
  step "--help of the built vidclf-server and vidclf" help_texts
  HELP_ARGS=(--help-dir "$WORK/help")
fi
validate_manifests() {
  node_ready || return 1
  node "$VALIDATE_DIR/validate.mjs" --root "$ROOT" "${MANIFEST_ARGS[@]}" "${HELP_ARGS[@]}" \
    --promql-out "$WORK/extracted-promql.yml"
}
step "schemas (kubernetes-models) and invariants of every rendered object; dashboard, compose, Dockerfiles" \
  validate_manifests
# The checks above must catch deliberately broken copies of the manifests.
validator_self_test() {
  node_ready || return 1
  node "$VALIDATE_DIR/validate.mjs" --self-test --root "$ROOT" "${SELFTEST_ARGS[@]}"
}
step "validator self-test" validator_self_test

# ---- Prometheus
promtool_checks() {
  need promtool || return 1
  promtool check config deploy/prometheus/prometheus.yml || return 1
  promtool check rules deploy/prometheus/rules.yml || return 1
  # The dashboard's and the adapter's expressions, written out by validate.mjs as rules.
  [ -f "$WORK/extracted-promql.yml" ] || { echo "no extracted expressions (validation failed)"; return 1; }
  promtool check rules "$WORK/extracted-promql.yml" || return 1
  (cd deploy/prometheus && promtool test rules rules_test.yml)
}
step "promtool check config/rules, dashboard and adapter PromQL, test rules" promtool_checks

# ---- docker-compose
compose_config() {
  need docker-compose || return 1
  docker-compose -f docker-compose.yml config -q || return 1
  docker-compose -f docker-compose.yml --profile gpu config -q
}
step "docker-compose config (default and gpu profile)" compose_config

# ---- Docker images, without building them
runtime_packages() {
  local list="deploy/docker/runtime-packages.txt" pkg candidate status=0 packages
  packages="$(sed -e 's/#.*//' -e '/^\s*$/d' "$list")"
  for pkg in $packages; do
    # apt-cache falls back to a regex match for a name it lacks (libfoo1.1 would find libfoo1.10):
    # only the block headed by exactly this name counts.
    candidate="$(apt-cache policy "$pkg" 2>/dev/null \
      | awk -v p="$pkg:" '/^[^ ]/ { mine = ($0 == p) } mine && /Candidate:/ { print $2; exit }')"
    if [ -z "$candidate" ] || [ "$candidate" = "(none)" ]; then
      echo "$list: $pkg has no candidate in apt's lists (misspelt, or run apt-get update)"
      status=1
    fi
  done
  if [ -x "$BUILD_DIR/bin/vidclf-server" ] && [ -x "$BUILD_DIR/bin/vidclf" ]; then
    need readelf || return 1
    local needed
    needed="$(deploy/docker/runtime-deps.sh --direct "$BUILD_DIR/bin/vidclf-server" \
      "$BUILD_DIR/bin/vidclf")" || return 1
    for pkg in $needed; do
      case "$pkg" in libc6|libgcc-s1|libstdc++6) continue ;; esac
      if ! grep -qxF "$pkg" <<<"$packages"; then
        echo "$list: the built executables link a library of $pkg, which is not listed"
        status=1
      fi
    done
  fi
  return "$status"
}
step "runtime-packages.txt: in apt, and covering what the executables link" runtime_packages

echo "check-deploy: $passed passed, $failed failed"
if [ "$failed" -gt 0 ]; then
  printf 'check-deploy: failed: %s\n' "${failures[@]}" >&2
  exit 1
fi
