#!/usr/bin/env python3
"""The training comparison behind `make bench-training`: writes docs/results.md and its plots.

On the synthetic benchmark (vidclf-train synth), with one embedding cache per clip length, it
trains and evaluates, seed by seed:

* the GRU head, the transformer with each of the eight attention mechanisms, the transformer
  without positional encoding, and the bag-of-frames baseline (mean-pooled embeddings, linear),
  on 16 uniformly sampled frames per clip (seed 000's Table 5.5 / seed 004's Table 3 columns:
  accuracy, macro recall, MCC, training time, peak training memory, attention FLOPs per clip);
* the same heads (one seed) on long clips of 660 to 1,100 frames sampled with `fps`: at 4 frames
  per second (about 230 frames per clip) and at 25 (every frame, about 880), or as --long-fps says;
* a softmax-trained transformer served with clustered and improved-clustered attention at several
  cluster counts and top-k, against its own accuracy (seed 001: substitution without retraining).

Every figure in the report comes from this run, and the report says how long it took. Usage:
  python3 bench/training/run_comparison.py --train-binary build/bin/vidclf-train \\
      --work-dir build/training-bench --output docs/results.md
--quick runs a short trial (one seed, few clips and epochs) to check that everything works.
"""

import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Every attention mechanism vidclf-train knows (`vidclf-train attention`), filled in by main().
MECHANISMS = []
PAIRS = [("fade_in", "fade_out"), ("hue_forward", "hue_backward"), ("zoom_in", "zoom_out"),
         ("flicker_slow", "flicker_fast"), ("focus_in", "focus_out")]
# The transformer of every row: small enough for the CPU (seed 004's 512/8/6 is --d-model 512
# --num-heads 8 --num-layers 6 --ffn-size 1024). Mechanism options suit 16 to 1,024 tokens.
TRANSFORMER = ["--head", "transformer", "--d-model", "64", "--num-heads", "4", "--num-layers",
               "2", "--ffn-size", "128", "--attention-parameter", "clusters=8", "topk=4",
               "nystrom_landmarks=8", "linformer_k=16"]
# The GRU of every row: 64 units, dropout 0.5 on its input embeddings and the transformer's
# learning rate. The default GRU (32 units, no dropout, 3e-3) overfits the cached embeddings.
GRU = ["--head", "gru", "--gru-hidden-size", "64", "--gru-input-dropout", "0.5",
       "--learning-rate", "1e-3"]


def log(message):
    print(f"[{datetime.datetime.now():%H:%M:%S}] {message}", flush=True)


def run(command, **kwargs):
    subprocess.run(command, check=True, **kwargs)


def linear_time():
    return [m for m in MECHANISMS if m != "softmax"]


def models():
    """(row name, fit flags) for every head of the main table."""
    rows = [("GRU", GRU)]
    rows += [(f"transformer, {m}", TRANSFORMER + ["--attention", m]) for m in MECHANISMS]
    rows.append(("transformer, softmax, no positions",
                 TRANSFORMER + ["--attention", "softmax", "--no-positional-encoding"]))
    rows.append(("bag of frames", ["--head", "bag_of_frames"]))
    return rows


def run_name(row, seed):
    return re.sub(r"[^a-z0-9]+", "-", row.lower()) + f"-s{seed}"


def fit_and_eval(train, work, row, flags, seed, epochs, quiet):
    name = run_name(row, seed)
    run_dir = os.path.join(work, "runs", name)
    if not os.path.exists(os.path.join(run_dir, "eval-test.json")):
        run([train, "fit", "--work", work, "--run", name, "--seed", str(seed), "--epochs",
             str(epochs), *flags], stdout=quiet)
        run([train, "eval", "--work", work, "--run", name], stdout=quiet)
    with open(os.path.join(run_dir, "fit.json")) as f:
        fit = json.load(f)
    with open(os.path.join(run_dir, "eval-test.json")) as f:
        evaluation = json.load(f)
    return name, fit, evaluation


def within_pair_accuracy(evaluation):
    """Of the clips of each pair predicted as one of the pair's two classes, the share right."""
    labels = evaluation["labels"]
    confusion = evaluation["confusion"]
    right = inside = 0
    for a, b in PAIRS:
        i, j = labels.index(a), labels.index(b)
        right += confusion[i][i] + confusion[j][j]
        inside += confusion[i][i] + confusion[i][j] + confusion[j][i] + confusion[j][j]
    return right / inside if inside else 0.0


def mean_std(values, digits=3):
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def prepare(train, data, work, quiet, embed_flags):
    """Embeds the synthetic set in `data` into `work` (only what a previous run left undone)."""
    run([train, "embed", "--data", os.path.join(data, "videos"),
         "--train-list", os.path.join(data, "splits", "trainlist01.txt"),
         "--test-list", os.path.join(data, "splits", "testlist01.txt"),
         "--class-index", os.path.join(data, "splits", "classInd.txt"),
         "--work", work, *embed_flags], stdout=quiet)


def comparison(train, work, seeds, epochs, quiet, rows=None):
    """Every row of `rows` (default: models()) at every seed: {row: [(name, fit, eval), ...]}."""
    results = {}
    for row, flags in rows or models():
        results[row] = []
        for seed in seeds:
            log(f"{work}: {row}, seed {seed}")
            results[row].append(fit_and_eval(train, work, row, flags, seed, epochs, quiet))
    return results


def main_table(results):
    lines = ["| model | accuracy | macro recall | MCC | within-pair accuracy | training time (s) "
             "| peak training memory (MiB) | attention MFLOPs per clip |",
             "|---|---|---|---|---|---|---|---|"]
    for row, runs in results.items():
        fits = [fit for _, fit, _ in runs]
        evals = [evaluation for _, _, evaluation in runs]
        lines.append("| " + " | ".join([
            row,
            mean_std([e["accuracy"] for e in evals]),
            mean_std([e["macro"]["recall"] for e in evals]),
            mean_std([e["mcc"] for e in evals]),
            mean_std([within_pair_accuracy(e) for e in evals]),
            mean_std([f["training_seconds"] for f in fits], 1),
            mean_std([f["peak_training_mib"] for f in fits], 0),
            f"{fits[0]['attention_flops_per_clip'] / 1e6:.3g}" if fits[0]["attention"] else "–",
        ]) + " |")
    return lines


def recall_table(results):
    labels = next(iter(results.values()))[0][2]["labels"]
    lines = ["| model | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    for row, runs in results.items():
        recalls = []
        for label in labels:
            values = [next(c["recall"] for c in e["classes"] if c["label"] == label)
                      for _, _, e in runs]
            recalls.append(f"{statistics.mean(values):.2f}")
        lines.append(f"| {row} | " + " | ".join(recalls) + " |")
    return lines


def substitution(train, work, base_run, settings, quiet):
    """The softmax run `base_run` evaluated with each (mechanism, clusters, topk) of `settings`,
    through copies of its bundle whose model.json differs only in those options."""
    source = os.path.join(work, "runs", base_run)
    rows = []
    for mechanism, clusters, topk in settings:
        name = f"{base_run}-as-{mechanism}-c{clusters}-k{topk}"
        target = os.path.join(work, "runs", name)
        if not os.path.exists(os.path.join(target, f"eval-test-{mechanism}.json")):
            shutil.rmtree(target, ignore_errors=True)
            os.makedirs(target)
            for file in ("head.pt", "backbone.pt", "fit.json"):
                os.link(os.path.join(source, file), os.path.join(target, file))
            with open(os.path.join(source, "model.json")) as f:
                config = json.load(f)
            config["head"]["attention"]["clusters"] = clusters
            config["head"]["attention"]["topk"] = topk
            config["head"]["attention_substitutions"] = [mechanism]
            with open(os.path.join(target, "model.json"), "w") as f:
                json.dump(config, f, indent=2)
            run([train, "eval", "--work", work, "--run", name, "--attention", mechanism],
                stdout=quiet)
        with open(os.path.join(target, f"eval-test-{mechanism}.json")) as f:
            rows.append((mechanism, clusters, topk, json.load(f)))
    return rows


def plot_cost(results, path, title):
    fig, ax = plt.subplots(figsize=(8, 5))
    for row, runs in results.items():
        flops = runs[0][1]["attention_flops_per_clip"]
        if not flops:
            continue
        accuracy = statistics.mean(e["accuracy"] for _, _, e in runs)
        ax.scatter(flops, accuracy, s=30)
        ax.annotate(row.replace("transformer, ", ""), (flops, accuracy), fontsize=8,
                    xytext=(4, 4), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_xlabel("attention FLOPs per clip (log)")
    ax.set_ylabel("test accuracy (mean over seeds)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_curves(work, results, path, title):
    fig, (loss_ax, recall_ax) = plt.subplots(1, 2, figsize=(11, 4.5))
    for row, runs in results.items():
        name = runs[0][0]
        epochs, losses, recalls = [], [], []
        with open(os.path.join(work, "runs", name, "curves.csv")) as f:
            next(f)
            for line in f:
                fields = line.strip().split(",")
                epochs.append(int(fields[0]))
                losses.append(float(fields[1]))
                recalls.append(float(fields[5]))
        label = row.replace("transformer, ", "")
        loss_ax.plot(epochs, losses, label=label, linewidth=1)
        recall_ax.plot(epochs, recalls, label=label, linewidth=1)
    loss_ax.set_title("training loss")
    recall_ax.set_title("validation macro recall")
    for ax in (loss_ax, recall_ax):
        ax.set_xlabel("epoch")
        ax.grid(True, alpha=0.3)
    recall_ax.legend(fontsize=7, loc="lower right")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--train-binary", required=True)
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--output", required=True, help="the report (docs/results.md)")
    parser.add_argument("--videos-per-class", type=int, default=400)
    parser.add_argument("--long-videos-per-class", type=int, default=16)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--long-fps", default="4,25",
                        help="fps of the long-clip sections (4: about 210 frames per clip, 25: "
                             "every frame, about 880)")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.videos_per_class, args.long_videos_per_class, args.seeds, args.epochs = 8, 4, 1, 3
    started = time.time()
    train = os.path.abspath(args.train_binary)
    registry = json.loads(subprocess.run([train, "attention", "--format", "json"], check=True,
                                         capture_output=True, text=True).stdout)
    MECHANISMS[:] = [mechanism["name"] for mechanism in registry]
    work = os.path.abspath(args.work_dir)
    docs = os.path.dirname(os.path.abspath(args.output))
    quiet = subprocess.DEVNULL
    seeds = list(range(1, args.seeds + 1))

    # Short clips: 16 frames, uniformly sampled, at the server's default 112-pixel crop.
    data = os.path.join(work, "data")
    if not os.path.exists(os.path.join(data, "splits", "testlist01.txt")):
        log("synthesizing the benchmark")
        run([train, "synth", "--output", data, "--videos-per-class", str(args.videos_per_class)],
            stdout=quiet, stderr=quiet)
    short = os.path.join(work, "short")
    log("embedding 16-frame clips")
    prepare(train, data, short, quiet, ["--num-frames", "16"])
    short_results = comparison(train, short, seeds, args.epochs, quiet)

    substituted = substitution(
        train, short, run_name("transformer, softmax", 1),
        [("clustered", c, 4) for c in (2, 4, 8, 16)] +
        [("improved-clustered", c, k) for c in (2, 4) for k in (2, 4, 8)], quiet)

    # Long clips: 660 to 1,100 frames at 10 to 25 frames per second, sampled with fps. A 64-pixel
    # crop keeps the embedding of some 10^5 frames within minutes on a CPU.
    long_data = os.path.join(work, "long-data")
    if not os.path.exists(os.path.join(long_data, "splits", "testlist01.txt")):
        log("synthesizing long clips")
        run([train, "synth", "--output", long_data, "--videos-per-class",
             str(args.long_videos_per_class), "--min-frames", "660", "--max-frames", "1100"],
            stdout=quiet, stderr=quiet)
    long_results = {}
    for fps in args.long_fps.split(","):
        long_work = os.path.join(work, f"long-fps{fps}")
        log(f"embedding long clips at {fps} frames per second")
        prepare(train, long_data, long_work, quiet,
                ["--sampling", "fps", "--frames-per-second", fps, "--num-frames", "1100",
                 "--crop-size", "64", "--resize-shorter-side", "64"])
        rows = [r for r in models() if "no positions" not in r[0]]
        long_results[fps] = (long_work, comparison(train, long_work, seeds[:1],
                                                     max(args.epochs // 2, 1), quiet, rows))

    log("writing the report")
    plot_cost(short_results, os.path.join(docs, "results-accuracy-vs-attention-cost.png"),
              "16-frame clips: accuracy against attention cost")
    plot_curves(short, short_results, os.path.join(docs, "results-training-curves.png"),
                "16-frame clips, seed 1")
    minutes = (time.time() - started) / 60
    report = write_report(args, short, short_results, substituted, long_results, minutes)
    with open(args.output, "w") as f:
        f.write(report + kept_sections(args.output))
    log(f"wrote {args.output} in {minutes:.0f} minutes")


def kept_sections(path):
    """The sections that `make bench-timelines` and `make bench-segmentation` wrote into the
    report (run_timelines.py, run_segmentation.py), kept."""
    if not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    kept = ""
    for heading in ("\n## Timelines", "\n## Segmentation"):
        start = text.find(heading)
        if start < 0:
            continue
        end = text.find("\n## ", start + 1)
        kept += "\n" + text[start + 1:end + 1 if end >= 0 else len(text)]
    return kept


def write_report(args, short, short_results, substituted, long_results, minutes):
    with open(os.path.join(short, "dataset.json")) as f:
        dataset = json.load(f)
    splits = {s: sum(1 for c in dataset["clips"] if c["split"] == s)
              for s in ("train", "validation", "test")}
    out = [
        "# Training results: heads and attention mechanisms on the synthetic benchmark",
        "",
        "Written by `make bench-training` (`bench/training/run_comparison.py`) on "
        f"{os.cpu_count()} cores; every figure below comes from its runs, whose fit steps took "
        f"{training_minutes(short_results, long_results):.0f} minutes in all (this invocation: "
        f"{minutes:.0f} minutes; runs already in its work directory are reused, not repeated). "
        "Re-run it to regenerate this page and its plots. This page: `run_comparison.py "
        f"{' '.join(sys.argv[1:])}`.",
        "",
        "**Data.** `vidclf-train synth --videos-per-class "
        f"{args.videos_per_class}`: ten classes in five pairs that differ only in the order or "
        "rate of change (fade in/out, hue forward/backward, zoom in/out, slow/fast flicker, focus "
        "in/out), with random textures, colours, noise, sizes, lengths, frame rates and "
        f"codecs. {splits['train']} training, {splits['validation']} validation and "
        f"{splits['test']} test clips (UCF101-style lists). The backbone is a ResNet18 with "
        "random, seeded weights (no pretrained weights can be fetched here), frozen; the heads "
        "train on its cached embeddings.",
        "",
        "**Training.** Adam, class-weighted cross-entropy, gradient clipping at norm 1, at most "
        f"{args.epochs} epochs with early stopping on validation macro recall (patience 15, best "
        "epoch kept), batch 16, learning rate 1e-3 (GRU, transformer) or 3e-3 (bag of frames). "
        "The GRU has 64 units and dropout 0.5 on its standardised input embeddings while "
        "training. The transformer is d_model 64, 4 heads, 2 post-norm layers, FFN 128, mean "
        "pooling; "
        "clustered attention uses 8 clusters (improved: top-4), Nyströmformer 8 landmarks, "
        f"Linformer k = 16. Seeds {', '.join(str(s) for s in range(1, args.seeds + 1))} seed "
        "the head's weights, shuffling and dropout; the data and backbone are the same for all.",
        "",
        "**Columns.** Mean ± standard deviation over the seeds, on the test split. Within-pair "
        "accuracy: of the clips of each pair predicted as one of that pair's two classes, the "
        "share predicted right (chance 0.5: what order-blind models get). Training time and "
        "peak memory are the fit step's (peak resident memory above what the process held "
        "before training). Attention FLOPs are counted from the shapes (`train/attention_cost.h`: "
        "the inner mechanism of every layer and head, at evaluation, for the mean clip length), "
        "as seed 000's FLOPs column counts only the attention blocks.",
        "",
        "## 16-frame clips",
        "",
        *main_table(short_results),
        "",
        "Per-class test recall (mean over seeds); the classes come in order-dependent pairs:",
        "",
        *recall_table(short_results),
        "",
        "![accuracy against attention cost](results-accuracy-vs-attention-cost.png)",
        "",
        "![training curves](results-training-curves.png)",
        "",
    ]
    softmax = [e for _, _, e in short_results["transformer, softmax"]][0]
    out += [
        "## Substitution: a softmax-trained model served with clustered attention",
        "",
        "The seed-1 softmax transformer above, evaluated on the test split with the "
        "mechanism replaced and nothing retrained (what `ClassifyRequest.attention` does for a "
        "bundle that allows it). With 16 tokens, 16 clusters make clustered attention exact.",
        "",
        "| served with | clusters | top-k | accuracy | macro recall | MCC | accuracy change |",
        "|---|---|---|---|---|---|---|",
        f"| softmax (trained) | – | – | {softmax['accuracy']:.3f} | "
        f"{softmax['macro']['recall']:.3f} | {softmax['mcc']:.3f} | – |",
    ]
    for mechanism, clusters, topk, e in substituted:
        out.append(f"| {mechanism} | {clusters} | {topk if 'improved' in mechanism else '–'} | "
                   f"{e['accuracy']:.3f} | {e['macro']['recall']:.3f} | {e['mcc']:.3f} | "
                   f"{e['accuracy'] - softmax['accuracy']:+.3f} |")
    out.append("")
    for fps, (long_work, results) in long_results.items():
        frames = next(iter(results.values()))[0][1]["mean_frames_per_clip"]
        out += [
            f"## Long clips: {frames:.0f} frames on average",
            "",
            f"Clips of 660 to 1,100 frames at 10 to 25 frames per second, sampled with `fps` at "
            f"{fps} frames per second ({frames:.0f} frames per clip on average), 64-pixel crops, "
            "one seed, at most "
            f"{max(args.epochs // 2, 1)} epochs. This is where the cost of softmax attention, "
            "quadratic in the length, shows in time and memory.",
            "",
            *main_table(results),
            "",
            *cost_against_softmax(results),
            "",
        ]
    out += [
        "## Targets",
        "",
        *targets(short_results),
        "",
    ]
    return "\n".join(out)


def cost_against_softmax(results):
    """One line: softmax's training time and peak memory as multiples of each other mechanism's."""
    def fit_mean(row, key):
        return statistics.mean(fit[key] for _, fit, _ in results[row])

    ratios = []
    for m in linear_time():
        row = f"transformer, {m}"
        time_ratio = (fit_mean("transformer, softmax", "training_seconds") /
                      fit_mean(row, "training_seconds"))
        memory_ratio = (fit_mean("transformer, softmax", "peak_training_mib") /
                        fit_mean(row, "peak_training_mib"))
        ratios.append(f"{m} {time_ratio:.1f}× and {memory_ratio:.1f}×")
    return ["Softmax's training time and peak memory against each other mechanism's: " +
            ", ".join(ratios) + "."]


def training_minutes(short_results, long_results):
    """The fit steps' time over every run in the report."""
    groups = [short_results] + [results for _, results in long_results.values()]
    return sum(fit["training_seconds"] for results in groups for runs in results.values()
               for _, fit, _ in runs) / 60


def targets(results):
    def accuracy(row):
        return statistics.mean(e["accuracy"] for _, _, e in results[row])

    lines = []
    for row in ("GRU", "transformer, softmax"):
        value = accuracy(row)
        lines.append(f"- {row} at 95% test accuracy or better: **{'holds' if value >= 0.95 else 'does not hold'}** ({value:.3f}).")
    softmax = accuracy("transformer, softmax")
    gaps = {m: accuracy(f"transformer, {m}") - softmax for m in linear_time()}
    within = [m for m, gap in gaps.items() if gap >= -0.02]
    lines.append(
        "- Every linear-time mechanism within 2 points of softmax: **"
        f"{'holds' if len(within) == len(gaps) else 'does not hold'}** (" +
        ", ".join(f"{m} {gap * 100:+.1f}" for m, gap in gaps.items()) + " points).")
    pair = statistics.mean(within_pair_accuracy(e) for _, _, e in results["bag of frames"])
    lines.append(f"- Bag of frames near chance on the order-dependent pairs: within-pair accuracy "
                 f"**{pair:.3f}** (chance 0.5).")
    return lines


if __name__ == "__main__":
    sys.exit(main())
