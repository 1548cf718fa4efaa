#!/usr/bin/env python3
"""Turns vidclf-attention-bench's CSV into docs/attention-benchmark.md and a PNG chart.

Usage: report.py RESULTS.csv BENCH_STDERR.txt OUT.md OUT.png "COMMAND THAT PRODUCED THEM"
"""
import csv
import platform
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

results_csv, stderr_txt, out_md, out_png, command = sys.argv[1:6]

attention = defaultdict(dict)  # mechanism -> length -> (ms, mib) or None when skipped
skipped = {}
streaming = defaultdict(dict)
with open(results_csv) as f:
    for row in csv.DictReader(f):
        length = int(row["length"])
        if row["median_ms"] == "skipped":
            skipped[(row["mechanism"], length)] = row["peak_mib"]
            continue
        value = (float(row["median_ms"]), float(row["peak_mib"]))
        (attention if row["kind"] == "attention" else streaming)[row["mechanism"]][length] = value

torch_line = open(stderr_txt).read().strip().splitlines()[0]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")),
           platform.processor())
cores = sum(1 for l in open("/proc/cpuinfo") if l.startswith("processor"))

lengths = sorted({n for m in attention.values() for n in m} | {n for _, n in skipped})
mechanisms = list(attention)
lines = ["# Attention benchmark", "",
         "Forward pass of each mechanism alone (no projections), batch 1, 8 heads, head dim 64, "
         "float32, on the CPU. Median of repeated runs after a warm-up; peak memory is the rise of "
         "the process's resident high-water mark during the call, above the inputs.", "",
         f"- Machine: {cpu}, {cores} cores; {torch_line}",
         f"- Command: `{command}` (one run on a shared machine; small-N timings are noisy)",
         "- A peak of 0 MiB means the call fit in memory the allocator already held, so the "
         "resident high-water mark did not rise.", "",
         "## Time (ms) and peak memory (MiB)", "",
         "| N | " + " | ".join(mechanisms) + " |",
         "|---|" + "---|" * len(mechanisms)]
for n in lengths:
    cells = []
    for m in mechanisms:
        if n in attention[m]:
            ms, mib = attention[m][n]
            cells.append(f"{ms:.1f} ms / {mib:.0f} MiB")
        elif (m, n) in skipped:
            cells.append(f"skipped ({skipped[(m, n)]})")
        else:
            cells.append("–")
    lines.append(f"| {n} | " + " | ".join(cells) + " |")

lines += ["", "## Checks against the expectations", ""]
for m in mechanisms:
    if m == "softmax" or 1024 not in attention[m] or 16384 not in attention[m]:
        continue
    per_token = (attention[m][16384][0] / 16384) / (attention[m][1024][0] / 1024)
    lines.append(f"- {m}: time per token at N=16384 is {per_token:.2f}× that at N=1024 "
                 f"({'within' if per_token <= 2 else 'NOT within'} 2×).")
soft = attention.get("softmax", {})
if 4096 in soft and 8192 in soft:
    lines.append(f"- softmax: doubling N from 4096 to 8192 multiplies time by "
                 f"{soft[8192][0] / soft[4096][0]:.2f} (quadratic: 4) and memory by "
                 f"{soft[8192][1] / max(soft[4096][1], 1e-9):.2f}.")
reference_n = 16384 if 16384 in soft else max(soft) if soft else None
if reference_n:
    for m in mechanisms:
        if m != "softmax" and reference_n in attention[m]:
            ms, mib = attention[m][reference_n]
            lines.append(f"- N={reference_n}: {m} is {soft[reference_n][0] / ms:.1f}× faster than "
                         f"softmax with {soft[reference_n][1] / max(mib, 1e-9):.1f}× less peak "
                         f"memory.")

lines += ["", "## Streaming: cost of one more frame after T frames", "",
          "Whole heads with seed 004's sizes, batch 1, one new 512-d frame embedding. "
          "gru: `GruHead::step` (2 layers, hidden 32) with its carried hidden state. "
          "causal-linear: `TransformerHead::step` (6 layers, d_model 512, 8 heads, FFN 1024) with "
          "each layer's carried (S, Z) state. softmax-window-16: `StepHead` over a sliding window "
          "of 16 frames re-run every 4 frames, per frame. softmax-recompute: the softmax "
          "transformer's forward over all T+1 frames, what a head without state must do to "
          "see the whole history.", "",
          "| T | " + " | ".join(streaming) + " |", "|---|" + "---|" * len(streaming)]
for t in sorted({t for m in streaming.values() for t in m}):
    lines.append(f"| {t} | " + " | ".join(
        f"{streaming[m][t][0]:.3f} ms" if t in streaming[m] else "–" for m in streaming) + " |")
lines += ["", f"![attention time and memory]({out_png.split('/')[-1]})", ""]
open(out_md, "w").write("\n".join(lines))

fig, (ax_time, ax_mem) = plt.subplots(1, 2, figsize=(13, 5))
for m in mechanisms:
    ns = sorted(attention[m])
    ax_time.plot(ns, [attention[m][n][0] for n in ns], marker="o", label=m)
    ax_mem.plot(ns, [max(attention[m][n][1], 0.1) for n in ns], marker="o", label=m)
for ax, label in ((ax_time, "median time (ms)"), (ax_mem, "peak memory (MiB)")):
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length N")
    ax.set_ylabel(label)
    ax.grid(True, which="both", alpha=0.3)
ax_time.legend(fontsize=8)
fig.suptitle("Attention forward pass, batch 1, 8 heads × 64, CPU float32")
fig.tight_layout()
fig.savefig(out_png, dpi=110)
