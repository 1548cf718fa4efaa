#!/usr/bin/env bash
# Builds the default model repository exactly as `make serve` does and checks what it holds:
# three models whose recorded test accuracy is well above chance (0.1 for ten classes), and one
# sample clip per class.
set -euo pipefail
build_repository=$1
bin_dir=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
start=$(date +%s)
"$build_repository" "$bin_dir" "$dir/repo" "$dir/work" "$dir/samples"
echo "demo model repository built in $(($(date +%s) - start)) s"
for name in demo demo-transformer demo-causal; do
  accuracy=$(/usr/bin/python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["metrics"]["accuracy"])' "$dir/repo/$name/1/model.json")
  echo "$name: test accuracy $accuracy"
  if ! awk -v a="$accuracy" 'BEGIN { exit !(a >= 0.5) }'; then
    echo "FAIL: $name's test accuracy $accuracy is below 0.5"
    exit 1
  fi
done
grep -q '"clustered"' "$dir/repo/demo-transformer/1/model.json"
for label in fade_in fade_out hue_forward hue_backward zoom_in zoom_out flicker_slow \
  flicker_fast focus_in focus_out; do
  ls "$dir/samples/$label".* >/dev/null
done
