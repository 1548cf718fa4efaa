#!/usr/bin/env python3
"""Segments on 10-minute timelines, for the GRU and every attention mechanism: the "Timelines"
section of docs/results.md (`make bench-timelines`).

1. The synthetic benchmark (`vidclf-train synth`, --videos-per-class clips of each class), its
   16-frame clips embedded once, and the heads of docs/results.md's main table (the same flags:
   run_comparison.models()) fitted at each seed and exported into one model repository.
2. `vidclf-train synth --timeline`: --timelines videos of 10 minutes, consecutive segments of
   4 to 16 s of the ten classes, a keyframe every 2 s, a third of the segments at another frame
   rate, with their true segments (truth.json).
3. One vidclf-server over that repository; for every model and timeline one ClassifySegments
   call (`vidclf segments --json`, the defaults: 4 frames/s, windows of the model's 16 frames
   every 8, threshold 0.5, hysteresis 0.1, segments of at least 1 s, gaps of 0.5 s bridged), its
   wall time and the server's peak resident memory above idle.
4. `vidclf-train eval --segments` of each model's predictions against the truth.
5. The naive client for one model and timeline: each window sent as its own Classify call (two in
   flight), each decoding and embedding its frames again.

The section replaces the one already in --output, or is appended; run_comparison.py keeps it.
"""

import argparse
import datetime
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(BENCH, "serving"))
sys.path.insert(1, HERE)

import run_benchmark as serving  # noqa: E402  bench/serving's
import run_comparison as comparison  # noqa: E402


def load_segments_benchmark():
    """bench/segments/run_benchmark.py, whose module name bench/serving's already holds."""
    spec = importlib.util.spec_from_file_location(
        "segments_benchmark", os.path.join(BENCH, "segments", "run_benchmark.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


segments_bench = load_segments_benchmark()
resident_bytes = segments_bench.resident_bytes

SECTION = "## Timelines: segments of 10-minute videos"
SAMPLE_FPS = 4

log = comparison.log


def rows():
    """The heads: the main table's, without the ablation of positions."""
    return [r for r in comparison.models() if "no positions" not in r[0]]


def base_rate(path):
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
                          "stream=r_frame_rate", "-of", "csv=p=0", path], check=True,
                         capture_output=True, text=True).stdout.strip()
    numerator, denominator = out.split("/")
    return int(numerator) / int(denominator)


def reading(results, truth):
    """What the table says, from its own figures."""
    def mean(row, key):
        return statistics.mean(r["metrics"][key] for r in results[row])

    temporal = [row for row in results if row != "bag of frames"]
    best = max(temporal, key=lambda row: mean(row, "f1@0.25"))
    worst = min(temporal, key=lambda row: mean(row, "f1@0.25"))
    true_per_timeline = sum(len(v["segments"]) for v in truth["videos"]) / len(truth["videos"])
    predicted = statistics.mean(
        r["metrics"]["predicted_segments"] / len(truth["videos"])
        for row in temporal for r in results[row])
    text = (
        f"**Reading.** Every temporal head lands between {mean(worst, 'f1@0.25'):.1f} "
        f"({worst}) and {mean(best, 'f1@0.25'):.1f} ({best}) F1@0.25; the heads cut the "
        f"timeline into {predicted:.0f} segments where it has {true_per_timeline:.0f}, which "
        f"the edit score and the strict overlaps punish. ")
    if "bag of frames" in results:
        text += (
            f"The bag of frames, which cannot see order, finds "
            f"{mean('bag of frames', 'frame_accuracy'):.1f}% of the instants: the classes come "
            f"in pairs that only the order of frames tells apart. ")
    seconds = [statistics.median(s for r in results[row] for s in r["seconds"])
               for row in results]
    text += (
        f"A call took {min(seconds):.1f} to {max(seconds):.1f} s (medians per head) whatever "
        f"the head: decoding every frame and embedding the sampled ones is its cost. Its memory "
        f"above idle was measured on a server holding all {sum(map(len, results.values()))} "
        f"models; docs/segments-benchmark.md measures a server of one.")
    return text


def write_section(args, record, truth):
    results, naive, idle_rss = record["results"], record["naive"], record["idle_rss"]
    timelines = len(truth["videos"])
    segments = sum(len(v["segments"]) for v in truth["videos"])
    durations = [v["duration_seconds"] for v in truth["videos"]]
    lines = [SECTION, ""]
    lines.append(
        f"Written by `make bench-timelines` (`bench/training/run_timelines.py`) on "
        f"{record['cpu']} ({record['cores']} cores), {record['date']}, in "
        f"{record['minutes']:.0f} minutes.")
    lines.append("")
    lines.append(
        f"**Data.** The heads below were fitted as in the main table (the same flags) on "
        f"`vidclf-train synth --videos-per-class {args.videos_per_class}`, at seeds "
        f"{', '.join(map(str, range(1, args.seeds + 1)))}, at most {args.epochs} epochs, and "
        f"served. They were then asked for segments of {timelines} timelines of "
        f"`vidclf-train synth --timeline` ({min(durations):.0f} s each; {segments} true "
        f"segments of 4 to 16 s, every class after another, a keyframe every 2 s, a third of "
        f"the segments at another frame rate; textures no training clip has): one "
        f"`ClassifySegments` call per model and timeline with the defaults (4 frames/s, so "
        f"{int(min(durations) * SAMPLE_FPS)} sampled frames; windows of 16 frames every 8; "
        f"threshold 0.5, hysteresis 0.1, at least 1 s, gaps up to 0.5 s bridged). Each "
        f"segment's effect runs over its whole length, while a window sees 4 s of it: the "
        f"heads were trained on whole 1-to-5-second clips, so a window of a long segment shows "
        f"them a slower change than they learnt.")
    lines.append("")
    lines.append(
        "**Columns.** `vidclf-train eval --segments`, mean ± standard deviation over the seeds "
        "(each seed over every timeline): frame-wise accuracy (every 0.25 s), the segmental "
        "edit score and F1 at overlaps 0.10, 0.25, 0.50 (as temporal action segmentation "
        "reports them), mAP at temporal IoU 0.3, 0.5, 0.7 (as temporal action localisation "
        "does), all in percent; predicted segments per timeline; the median wall time of one "
        "call (decoding the whole video, embedding 2,400 frames once, every window's head) and "
        "the server's peak resident memory during it above its idle "
        f"{idle_rss / 2**20:.0f} MiB with every model loaded.")
    lines.append("")
    lines.append("| model | frame accuracy | edit | F1@0.10 | F1@0.25 | F1@0.50 | mAP@0.3 | "
                 "mAP@0.5 | mAP@0.7 | segments per timeline | seconds per video | "
                 "peak MiB above idle |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row, runs in results.items():
        def column(key, digits=1, runs=runs):
            return comparison.mean_std([r["metrics"][key] for r in runs], digits)
        per_timeline = [r["metrics"]["predicted_segments"] / timelines for r in runs]
        seconds = statistics.median(s for r in runs for s in r["seconds"])
        peak = max(p for r in runs for p in r["peak_above_idle"])
        lines.append(
            f"| {row} | {column('frame_accuracy')} | {column('edit')} | {column('f1@0.10')} | "
            f"{column('f1@0.25')} | {column('f1@0.50')} | {column('map@0.3')} | "
            f"{column('map@0.5')} | {column('map@0.7')} | "
            f"{statistics.mean(per_timeline):.0f} | {seconds:.1f} | {peak / 2**20:.0f} |")
    lines.append("")
    lines.append(reading(results, truth))
    lines.append("")
    lines.append(
        f"**Embedding once against re-embedding.** {naive['model']} on {naive['video']}: one "
        f"`ClassifySegments` call took {naive['segments_seconds']:.1f} s and embedded "
        f"{naive['embedded']} frames; the naive client, sending each of its {naive['calls']} "
        f"windows as a `Classify` call ({segments_bench.NAIVE_CONCURRENCY} in flight, each "
        f"decoding from the keyframe before its window), took {naive['seconds']:.1f} s "
        f"({naive['seconds'] / naive['segments_seconds']:.1f}×) and embedded "
        f"{16 * naive['calls']} frames ({16 * naive['calls'] / naive['embedded']:.1f}×). "
        "docs/segments-benchmark.md measures the same on a 720p H.264 file.")
    lines.append("")
    lines.append(
        "Reproduce: `make bench-timelines` (or `/usr/bin/python3 bench/training/run_timelines.py "
        "--train-binary build/bin/vidclf-train --server-binary build/bin/vidclf-server "
        "--client-binary build/bin/vidclf --work-dir build/timelines-bench --output "
        "docs/results.md`).")
    return "\n".join(lines) + "\n"


def replace_section(path, section, heading=SECTION):
    """Puts `section` (text from its `heading` line on) in place of the page's section of that
    heading, or after the page's end."""
    text = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
    start = text.find(heading)
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        end = text.find("\n## ", start + len(heading))
        text = text[:start] + section + (text[end + 1:] if end >= 0 else "")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--train-binary", required=True)
    parser.add_argument("--server-binary", required=True)
    parser.add_argument("--client-binary", required=True)
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--output", required=True, help="docs/results.md")
    parser.add_argument("--videos-per-class", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--timelines", type=int, default=2)
    parser.add_argument("--timeline-seconds", type=float, default=600)
    parser.add_argument("--report-only", action="store_true",
                        help="write the section again from the work directory's results.json")
    args = parser.parse_args()
    work = os.path.abspath(args.work_dir)
    if args.report_only:
        with open(os.path.join(work, "results.json"), encoding="utf-8") as f:
            record = json.load(f)
        with open(os.path.join(work, "timelines", "truth.json"), encoding="utf-8") as f:
            truth = json.load(f)
        replace_section(args.output, write_section(args, record, truth))
        return
    started = time.time()
    train = os.path.abspath(args.train_binary)
    client = os.path.abspath(args.client_binary)
    registry = json.loads(subprocess.run([train, "attention", "--format", "json"], check=True,
                                         capture_output=True, text=True).stdout)
    comparison.MECHANISMS[:] = [mechanism["name"] for mechanism in registry]
    quiet = subprocess.DEVNULL
    seeds = list(range(1, args.seeds + 1))

    data = os.path.join(work, "data")
    if not os.path.exists(os.path.join(data, "splits", "testlist01.txt")):
        log("synthesizing the benchmark")
        comparison.run([train, "synth", "--output", data, "--videos-per-class",
                        str(args.videos_per_class)], stdout=quiet, stderr=quiet)
    clips = os.path.join(work, "clips")
    log("embedding 16-frame clips")
    comparison.prepare(train, data, clips, quiet, ["--num-frames", "16"])
    fitted = comparison.comparison(train, clips, seeds, args.epochs, quiet, rows())
    repository = os.path.join(work, "repository")
    for runs in fitted.values():
        for name, _, _ in runs:
            if not os.path.exists(os.path.join(repository, name)):
                comparison.run([train, "export", "--work", clips, "--run", name,
                                "--output-repository", repository, "--name", name], stdout=quiet)

    timelines_dir = os.path.join(work, "timelines")
    truth_path = os.path.join(timelines_dir, "truth.json")
    if not os.path.exists(truth_path):
        log("synthesizing timelines")
        comparison.run([train, "synth", "--timeline", "--output", timelines_dir, "--timelines",
                        str(args.timelines), "--timeline-seconds", str(args.timeline_seconds),
                        "--seed", "1000"], stdout=quiet, stderr=quiet)
    with open(truth_path, encoding="utf-8") as f:
        truth = json.load(f)
    videos = [v["video"] for v in truth["videos"]]

    server = serving.Server(os.path.abspath(args.server_binary), repository,
                            ["--allow-uri", "file://" + timelines_dir + "/",
                             "--max-upload-mib", "512"], "timelines")
    results = {}
    naive = None
    try:
        first = fitted[rows()[0][0]][0][0]
        uri0 = "file://" + os.path.join(timelines_dir, videos[0])
        segments_bench.segments_call(client, server, uri0, first)  # warm-up
        time.sleep(2)
        idle_rss = resident_bytes(server.process.pid)
        for row, runs in fitted.items():
            results[row] = []
            for name, _, _ in runs:
                log(f"segments: {name}")
                predicted = {"videos": []}
                seconds, peaks = [], []
                for video in videos:
                    uri = "file://" + os.path.join(timelines_dir, video)
                    call = segments_bench.segments_call(client, server, uri, name)
                    seconds.append(call["seconds"])
                    peaks.append(call["peak_rss"] - idle_rss)
                    predicted["videos"].append({"video": video, "segments": call["predicted"]})
                path = os.path.join(work, f"predicted-{name}.json")
                with open(path, "w", encoding="utf-8") as f:
                    json.dump(predicted, f)
                metrics = json.loads(subprocess.run(
                    [train, "eval", "--segments", "--truth", truth_path, "--predicted", path,
                     "--json"], check=True, capture_output=True, text=True).stdout)
                results[row].append({"name": name, "metrics": metrics, "seconds": seconds,
                                     "peak_above_idle": peaks})
        log("the naive client")
        call = segments_bench.segments_call(client, server, uri0, first)
        embedded = int(call["summary"].split(" embedded")[0].split()[-1])
        # Each window samples every k-th frame of the timeline's base rate: 4 frames/s.
        stride = max(1, round(base_rate(os.path.join(timelines_dir, videos[0])) / SAMPLE_FPS))
        windows = segments_bench.naive_windows(client, server, uri0, first, 16, 8,
                                               truth["videos"][0]["duration_seconds"], stride)
        naive = {"model": first, "video": videos[0], "segments_seconds": call["seconds"],
                 "embedded": embedded, "seconds": windows["seconds"], "calls": windows["calls"]}
    finally:
        server.stop()
    record = {"results": results, "naive": naive, "idle_rss": idle_rss,
              "minutes": (time.time() - started) / 60, "cpu": serving.cpu_model(),
              "cores": len(os.sched_getaffinity(0)), "date": datetime.date.today().isoformat()}
    with open(os.path.join(work, "results.json"), "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)
    replace_section(args.output, write_section(args, record, truth))
    log(f"wrote {args.output} in {record['minutes']:.0f} minutes")


if __name__ == "__main__":
    main()
