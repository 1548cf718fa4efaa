# shellcheck shell=bash
# Sourced by bench/gpu/run.sh and bench/gpu/serve.sh, which set `out` (their OUTPUT_DIR).
# step NAME COMMAND...: runs COMMAND with its output in $out/NAME.txt and says how long it took;
# when it fails, shows its last lines, adds NAME to the array `failed` and returns 1.
failed=()

step() {
  local name=$1
  shift
  echo "== $name: $*"
  local start=$SECONDS
  # shellcheck disable=SC2154 # out is the sourcing script's
  if "$@" >"$out/$name.txt" 2>&1; then
    echo "   done in $((SECONDS - start)) s"
  else
    echo "   FAILED after $((SECONDS - start)) s; its last lines:"
    tail -n 25 "$out/$name.txt"
    failed+=("$name")
    return 1
  fi
}
