#!/usr/bin/env bash
# Builds the default model repository from the synthetic benchmark, on the CPU:
#   demo               GRU head (hidden 64, input dropout 0.5, as bench/training uses); the
#                      default model
#   demo-transformer   softmax transformer whose bundle allows clustered and improved-clustered
#                      attention in its place (same weights)
#   demo-causal        causal-linear transformer: streams with a constant-size state
# The videos are synthesized and embedded once; the three heads train on the same embeddings.
#
# usage: build-model-repository.sh BIN_DIR REPOSITORY WORK_DIR [SAMPLES_DIR]
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 BIN_DIR REPOSITORY WORK_DIR [SAMPLES_DIR]" >&2
  exit 2
fi
train="$1/vidclf-train"
repository=$2
work=$3
samples=${4:-}
data="$work/data"

"$train" synth --output "$data" --videos-per-class "${VIDEOS_PER_CLASS:-60}"
"$train" embed --data "$data/videos" --train-list "$data/splits/trainlist01.txt" \
  --test-list "$data/splits/testlist01.txt" --class-index "$data/splits/classInd.txt" \
  --work "$work/embeddings"

# run name, model name, then fit's flags
models=(
  "gru demo --head gru --gru-hidden-size 64 --gru-input-dropout 0.5 --learning-rate 1e-3"
  "transformer demo-transformer --head transformer --attention softmax --d-model 64
     --ffn-size 128 --patience 10 --attention-substitutions clustered improved-clustered"
  "causal demo-causal --head transformer --attention causal-linear --d-model 64 --ffn-size 128
     --patience 10"
)
for spec in "${models[@]}"; do
  # shellcheck disable=SC2206 # split the spec, across its lines, into words
  fields=($spec)
  run=${fields[0]}
  name=${fields[1]}
  if [ -f "$repository/$name/1/model.json" ]; then
    echo "$repository/$name/1 is already there"
    continue
  fi
  "$train" fit --work "$work/embeddings" --run "$run" "${fields[@]:2}" >"$work/fit-$run.log"
  tail -n 1 "$work/fit-$run.log"
  "$train" eval --work "$work/embeddings" --run "$run" >"$work/eval-$run.txt"
  export_flags=(--work "$work/embeddings" --run "$run" --output-repository "$repository"
    --name "$name")
  if [ -n "$samples" ] && [ "$name" = demo ]; then export_flags+=(--samples-dir "$samples"); fi
  "$train" export "${export_flags[@]}"
done
