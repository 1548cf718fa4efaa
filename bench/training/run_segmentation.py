#!/usr/bin/env python3
"""Heads trained per frame on timelines: the "Segmentation" section of docs/results.md
(`make bench-segmentation`).

1. `vidclf-train synth --timeline` at three disjoint seeds: --train-timelines videos of
   --train-seconds to train on, --validation-timelines to choose the epoch, and --test-timelines
   of 10 minutes to score (consecutive segments of 4 to 16 s of the ten classes, a keyframe every
   2 s, a third of the segments at another frame rate, textures of their own).
2. `vidclf-train embed --truth ... --validation-truth ... --test-truth ...`: every frame sampled
   at 4 frames/s, ClassifySegments's default rate.
3. For each head and seed, `vidclf-train fit` (per frame: cross-entropy with the smoothing loss,
   windows of 64 frames) and `vidclf-train eval` on the test timelines: accuracy over the sampled
   frames, and the segments the server's tracker makes of the per-frame scores (threshold 0.5,
   hysteresis 0.1, at least 1 s, gaps of 0.5 s bridged) scored as `eval --segments` scores them.

The section replaces the one already in --output, or is appended; run_comparison.py keeps it.
"""

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import run_comparison as comparison  # noqa: E402
import run_timelines as timelines  # noqa: E402

SECTION = "## Segmentation: heads trained per frame"
log = comparison.log
COLUMNS = [("sampled_frame_accuracy", "sampled frames right"), ("frame_accuracy", "frame accuracy"),
           ("edit", "edit"), ("f1@0.10", "F1@0.10"), ("f1@0.25", "F1@0.25"),
           ("f1@0.50", "F1@0.50"), ("map_mean", "mAP (0.3, 0.5, 0.7)")]


def heads():
    """(name, kind, fit flags): online heads label each frame from the frames up to it; offline
    ones see the whole video."""
    gru = ["--head", "gru", "--gru-hidden-size", "64", "--gru-input-dropout", "0.5"]
    # Without positions: trained on windows of 64 frames, a transformer with sinusoidal positions
    # meets positions no window had on whole videos (docs/training.md).
    transformer = ["--head", "transformer", "--d-model", "64", "--num-heads", "4",
                   "--num-layers", "2", "--ffn-size", "128", "--no-positional-encoding"]
    return [
        ("GRU, frame differences", "online", gru),
        ("GRU, frames", "online", gru + ["--head-input", "frames"]),
        ("transformer, causal-linear, frame differences", "online",
         transformer + ["--attention", "causal-linear", "--pooling", "last"]),
        ("transformer, softmax, frame differences", "offline",
         transformer + ["--attention", "softmax"]),
    ]


def synthesize(train, directory, count, seconds, seed):
    if not os.path.exists(os.path.join(directory, "truth.json")):
        comparison.run([train, "synth", "--timeline", "--timelines", str(count),
                        "--timeline-seconds", str(seconds), "--seed", str(seed),
                        "--output", directory], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    with open(os.path.join(directory, "truth.json"), encoding="utf-8") as f:
        return json.load(f)["videos"]


def mean_std(values):
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.mean(values):.1f} ± {statistics.stdev(values):.1f}"


def write_section(args, results, truth):
    segments = sum(len(video["segments"]) for video in truth["test"])
    lines = [SECTION, "",
             f"Written by `make bench-segmentation` (`bench/training/run_segmentation.py`) on "
             f"{args.cpu}, {datetime.date.today():%Y-%m-%d}.", "",
             f"**Data.** `vidclf-train synth --timeline` at disjoint seeds: "
             f"{args.train_timelines} timelines of {args.train_seconds:g} s to train on "
             f"(seed {args.seeds_of_data[0]}), {args.validation_timelines} of "
             f"{args.validation_seconds:g} s to choose the epoch (seed {args.seeds_of_data[1]}), "
             f"{args.test_timelines} of {args.test_seconds:g} s to score (seed "
             f"{args.seeds_of_data[2]}; {segments} true segments of 4 to 16 s, a keyframe every 2 s, "
             f"a third of the segments at another frame rate, every segment a texture of its "
             f"own). Embedded once by the random-weight ResNet18 at 112 px, every frame sampled "
             f"at 4 frames/s (a 10-minute video is 2,400 frames).", "",
             "**Training.** `vidclf-train fit` on the timelines: a label per sampled frame, "
             "class-weighted cross-entropy plus MS-TCN's smoothing loss (weight 0.15, clamp 4: "
             "it punishes labels that flicker between neighbouring frames and, truncated, lets "
             "true boundaries through), windows of 64 frames at a random offset each epoch, at "
             f"most {args.epochs} epochs with early stopping on validation macro recall. The GRU: "
             "hidden 64, 2 layers, dropout 0.5 on its input; the transformers: d_model 64, 4 "
             "heads, 2 layers, feed-forward 128, no positional encoding (docs/training.md), "
             "causal-linear with last pooling. *Frame differences*: the head "
             "sees x_t - x_{t-1} of the standardised embeddings (`--head-input`, the default for "
             "timelines) instead of x_t. *Online* heads label each frame from the frames up to "
             "it (what a live feed can use); *offline*, from the whole video.", "",
             "**Columns.** `vidclf-train eval` on the test timelines, mean ± standard deviation "
             "over the fit seeds (listed), in percent: the share of sampled frames whose most probable "
             "class is right, then the segments the server's tracker makes of the per-frame "
             "scores (threshold 0.5, hysteresis 0.1, at least 1 s, gaps of 0.5 s bridged) "
             "scored as `eval --segments` scores them (frame-wise accuracy every 0.25 s, where "
             "time no segment covers counts as wrong; edit score; F1 at overlaps 0.10, 0.25, "
             "0.50; mAP over temporal IoU 0.3, 0.5, 0.7); segments predicted per test timeline; "
             "minutes of training (fit.json) on 2 cores.", "",
             "| head | kind | seeds | " + " | ".join(title for _, title in COLUMNS) +
             " | segments per timeline | training minutes |",
             "|---|---|---|" + "---|" * (len(COLUMNS) + 2)]
    for name, kind, runs in results:
        cells = [mean_std([run["eval"][key] for run in runs]) for key, _ in COLUMNS]
        predicted = statistics.mean(run["eval"]["predicted_segments"] for run in runs)
        training = statistics.mean(run["fit_seconds"] for run in runs) / 60
        seeds = ", ".join(str(run["seed"]) for run in runs)
        lines.append(f"| {name} | {kind} | {seeds} | " + " | ".join(cells) +
                     f" | {predicted / args.test_timelines:.0f} | {training:.1f} |")
    lines += ["", f"The windowed clip heads of the section above, on other timelines of the same "
              f"generator, found 31.2 to 35.9% of the instants (frame accuracy) and 11.1 to "
              f"17.6 F1@0.50.", "",
              "Reproduce: `make bench-segmentation` (or `/usr/bin/python3 "
              "bench/training/run_segmentation.py --train-binary build/bin/vidclf-train "
              "--work-dir build/segmentation-bench --output docs/results.md`).", ""]
    timelines.replace_section(args.output, "\n".join(lines), SECTION)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train-binary", required=True)
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--cpu", default="AMD EPYC (2 cores)")
    parser.add_argument("--seeds-of-data", type=int, nargs=3, default=[21, 22, 23],
                        metavar=("TRAIN", "VALIDATION", "TEST"))
    parser.add_argument("--train-timelines", type=int, default=24)
    parser.add_argument("--train-seconds", type=float, default=300)
    parser.add_argument("--validation-timelines", type=int, default=6)
    parser.add_argument("--validation-seconds", type=float, default=120)
    parser.add_argument("--test-timelines", type=int, default=4)
    parser.add_argument("--test-seconds", type=float, default=600)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--heads", nargs="*", help="Only the heads of these names.")
    args = parser.parse_args()
    os.makedirs(args.work_dir, exist_ok=True)
    data = os.path.join(args.work_dir, "timelines")
    truth = {}
    for split, count, seconds, seed in [
            ("train", args.train_timelines, args.train_seconds, args.seeds_of_data[0]),
            ("validation", args.validation_timelines, args.validation_seconds,
             args.seeds_of_data[1]),
            ("test", args.test_timelines, args.test_seconds, args.seeds_of_data[2])]:
        log(f"synth {split}: {count} timelines of {seconds:g} s")
        truth[split] = synthesize(args.train_binary, os.path.join(data, split), count, seconds,
                                  seed)
    work = os.path.join(args.work_dir, "work")
    log("embed")
    comparison.run([args.train_binary, "embed", "--work", work,
                    "--truth", os.path.join(data, "train", "truth.json"),
                    "--validation-truth", os.path.join(data, "validation", "truth.json"),
                    "--test-truth", os.path.join(data, "test", "truth.json")],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # Seed by seed, every head at each, the section rewritten after every run: a run stopped
    # part way leaves a table of the seeds done. Runs whose eval-test.json exists are read, not
    # fitted again.
    chosen = [head for head in heads() if not args.heads or head[0] in args.heads]
    results = [(name, kind, []) for name, kind, _ in chosen]
    for seed in args.seeds:
        for (name, _, flags), (_, _, runs) in zip(chosen, results):
            run = re.sub("[^a-z0-9]+", "-", name.lower()) + f"-s{seed}"
            run_dir = os.path.join(work, "runs", run)
            if not os.path.exists(os.path.join(run_dir, "eval-test.json")):
                log(f"fit {run}")
                comparison.run([args.train_binary, "fit", "--work", work, "--run", run,
                                "--seed", str(seed), "--epochs", str(args.epochs)] + flags,
                               stdout=subprocess.DEVNULL)
                comparison.run([args.train_binary, "eval", "--work", work, "--run", run],
                               stdout=subprocess.DEVNULL)
            with open(os.path.join(run_dir, "eval-test.json"), encoding="utf-8") as f:
                evaluation = json.load(f)
            with open(os.path.join(run_dir, "fit.json"), encoding="utf-8") as f:
                fit_seconds = json.load(f)["training_seconds"]
            runs.append({"eval": evaluation, "fit_seconds": fit_seconds, "seed": seed})
            log(f"{run}: {evaluation['sampled_frame_accuracy']:.1f}% of frames")
            write_section(args, [row for row in results if row[2]], truth)


if __name__ == "__main__":
    main()
