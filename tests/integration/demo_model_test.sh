#!/usr/bin/env bash
# Builds the demo model exactly as `make serve` does (default flags) and checks that it learned:
# held-out accuracy well above chance (0.25 for four classes), recorded in the bundle too.
set -euo pipefail
train=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
output=$("$train" --output-repository "$dir/repo" --samples-dir "$dir/samples")
echo "$output"
accuracy=$(echo "$output" | sed -n 's/.*test accuracy \([0-9.]*\).*/\1/p')
if ! awk -v a="$accuracy" 'BEGIN { exit !(a >= 0.8) }'; then
  echo "FAIL: test accuracy ${accuracy:-missing} is below 0.8"
  exit 1
fi
grep -q '"test_accuracy"' "$dir/repo/demo/1/model.json"
for label in fade_in fade_out hue_forward hue_backward; do test -s "$dir/samples/$label.mp4"; done
echo "demo model: test accuracy $accuracy"
