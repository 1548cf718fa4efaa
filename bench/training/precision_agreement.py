#!/usr/bin/env python3
"""The backbone's bf16 and int8 against its fp32 on every head of a work directory: the "Backbone
precision on the benchmark heads" section of docs/backbone-benchmark.md.

For each run in WORK/runs, `vidclf-train eval --backbone-precision P` decodes the test split's
clips again, embeds them in P as `vidclf-server --precision P` does on this CPU, and compares the
run's answers with those from the cached fp32 embeddings (the work directory's int8 calibration
is made first with `vidclf-train calibrate` where it has none). The table gives, per head and
precision, over the runs of its seeds: the share of test clips whose top class stays the same, the
accuracy's change, the embeddings' median error, and how many runs meet `--precision auto`'s bar
(at least 99% the same top class, at most 0.5 points of accuracy lost).

  precision_agreement.py --train-binary build/bin/vidclf-train \
      --work build/timelines-bench/clips --output docs/backbone-benchmark.md

The work directory of `make bench-timelines` (build/timelines-bench/clips) holds the main table's
heads at three seeds; its clips must still be where its dataset.json says.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import textwrap

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_timelines as timelines  # noqa: E402  its page-section writer and bench/serving's

SECTION = "## Backbone precision on the benchmark heads"
AGREEMENT_BAR = 0.99
ACCURACY_BAR = 0.005


def evaluation(train, work, run, precision):
    """The run's comparison with fp32, evaluated anew: an earlier eval-test-PRECISION.json may
    predate the work directory's calibration."""
    subprocess.run([train, "eval", "--work", work, "--run", run, "--backbone-precision",
                    precision], check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(work, "runs", run, f"eval-test-{precision}.json"),
              encoding="utf-8") as f:
        return json.load(f)["against_float32_backbone"]


def mean_sd(values, scale=1.0, digits=1):
    mean = statistics.mean(values) * scale
    if len(values) < 2:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {statistics.stdev(values) * scale:.{digits}f}"


def section(args, rows, clips):
    with open(os.path.join(args.work, "dataset.json"), encoding="utf-8") as f:
        dataset = json.load(f)
    intro = textwrap.fill(
        f"Written by `bench/training/precision_agreement.py --work WORK --precisions "
        f"{args.precisions}` on the work directory of `make bench-timelines` (the main table's "
        f"heads of docs/results.md, {len(rows[0]['runs'])} seeds each, "
        f"{len(dataset['clips']) // len(dataset['classes'])} clips per class), "
        f"{clips} test clips a run, "
        f"{os.cpu_count()} cores of this machine's CPU ({timelines.serving.cpu_model()}). "
        "Mean ± sd over "
        "the seeds; \"runs at the bar\" counts those with at least 99% the same top class and at "
        "most 0.5 points of accuracy lost, which `--precision auto` requires.", 100,
        break_on_hyphens=False)
    lines = [
        SECTION,
        "",
        intro,
        "",
        "| head | precision | same top class, % | accuracy change, points | median embedding "
        "error, % | runs at the bar |",
        "|---|---|---|---|---|---|",
    ]
    totals = {}
    for row in rows:
        results = row["results"]
        agreement = [r["same_top1"] / r["clips"] for r in results]
        change = [r["accuracy"] - r["accuracy_fp32"] for r in results]
        error = [r["median_embedding_error"] for r in results]
        at_bar = sum(a >= AGREEMENT_BAR and c >= -ACCURACY_BAR
                     for a, c in zip(agreement, change))
        lines.append(f"| {row['head']} | {row['precision']} | {mean_sd(agreement, 100)} | "
                     f"{mean_sd(change, 100, 2)} | {mean_sd(error, 100, 2)} | "
                     f"{at_bar} of {len(results)} |")
        total = totals.setdefault(row["precision"], [0, 0])
        total[0] += at_bar
        total[1] += len(results)
    lines.append("")
    lines.append("Runs at the bar: " + "; ".join(
        f"{precision} {at_bar} of {runs}" for precision, (at_bar, runs) in totals.items()) + ".")
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--train-binary", required=True)
    parser.add_argument("--work", required=True, help="a work directory's embeddings (its runs/)")
    parser.add_argument("--output", help="the page whose section is written; else printed")
    parser.add_argument("--precisions", default="bf16,int8")
    args = parser.parse_args()
    train = os.path.abspath(args.train_binary)
    work = os.path.abspath(args.work)
    precisions = args.precisions.split(",")
    if "int8" in precisions and not os.path.exists(
            os.path.join(work, "backbone", "backbone_int8.json")):
        subprocess.run([train, "calibrate", "--work", work], check=True,
                       stdout=subprocess.DEVNULL)
    heads = {}
    for run in sorted(os.listdir(os.path.join(work, "runs"))):
        match = re.fullmatch(r"(.+)-s(\d+)", run)
        if match:  # the seeded runs only: "gru-s1"
            heads.setdefault(match.group(1), []).append(run)
    rows = []
    clips = 0
    for head, runs in heads.items():
        for precision in precisions:
            results = [evaluation(train, work, run, precision) for run in runs]
            clips = results[0]["clips"]
            rows.append({"head": head, "precision": precision, "runs": runs,
                         "results": results})
            print(head, precision, [r["same_top1"] for r in results], flush=True)
    lines = section(args, rows, clips)
    if args.output:
        timelines.replace_section(args.output, "\n".join(lines) + "\n", SECTION)
    else:
        print("\n".join(lines))


if __name__ == "__main__":
    main()
