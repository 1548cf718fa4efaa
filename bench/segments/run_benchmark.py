#!/usr/bin/env python3
"""The segments benchmark behind `make bench-segments`: writes docs/segments-benchmark.md.

One 10-minute 720p H.264 video (25 fps, a keyframe every 2 s) pulled by the server from a file
URI, answered in one ClassifySegments call (4 frames/s, windows of the model's 16 frames every
8: 4 s every 2 s), against:

* the decode limit, as `make bench-e2e` defines it: the CPU time libavcodec (through PyAV, one
  thread, no conversion) takes to decode the frames the call needs, spread over the cores, plus
  the backbone's FLOPs for the sampled frames at the sgemm rate of all the cores, measured in
  the same run. The frames it needs: every frame ("all", what the call decodes), and, as a
  bound below what any decoder could reach, the reference frames alone ("noref": a decoder that
  skipped the non-reference frames it does not sample would land between the two);
* the naive client: the same windows sent as separate Classify calls of the same URI
  (sampling "window", 16 frames every 6th from each window's start: 0.24 s apart where the call
  samples 0.25 s apart), two calls in flight at once, each decoding its window from the keyframe
  before it (the server runs with --max-upload-mib 512: a call counts the bytes it reads from
  the URI, and the file is larger than the default 64 MiB).

And the server's resident memory during the call, above what it held idle after a warm-up call
(each call on a server of its own). The call and the naive client take turns over `--rounds`
rounds; the report gives medians.

Usage (what `make bench-segments` runs):
  python3 bench/segments/run_benchmark.py --server-binary build/bin/vidclf-server \\
      --client-binary build/bin/vidclf --repository build/model-repository \\
      --output docs/segments-benchmark.md --work-dir build/segments-bench
"""

import argparse
import concurrent.futures
import datetime
import json
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SERVING = os.path.join(os.path.dirname(HERE), "serving")
sys.path.insert(0, SERVING)

import run_benchmark as serving  # noqa: E402  bench/serving's, first on the path: its helpers

DURATION_S = 600
FPS = 25
SAMPLE_FPS = 4
NAIVE_STRIDE = 6  # 25 / 6 = 4.17 frames/s: the window sampling nearest 4 frames/s
NAIVE_CONCURRENCY = 2
NAIVE_UPLOAD_MIB = 512
TARGET_LIMIT_RATIO = 1.2  # the call's time against the decode limit
TARGET_RSS_ABOVE_IDLE = 50e6  # bytes

log = serving.log
median = serving.median


def make_video(work_dir):
    path = os.path.join(work_dir, "timeline-720p.mp4")
    if not os.path.exists(path):
        log("encoding the 10-minute 720p video")
        serving.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                     f"testsrc2=size=1280x720:rate={FPS}", "-t", str(DURATION_S), "-c:v",
                     "libx264", "-preset", "veryfast", "-g", str(2 * FPS), "-pix_fmt", "yuv420p",
                     "-movflags", "+faststart", path + ".part.mp4"])
        os.replace(path + ".part.mp4", path)
    return path


def resident_bytes(pid):
    with open(f"/proc/{pid}/status", encoding="utf-8") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return None


class PeakResident:
    """The most resident memory of `pid`, sampled every 20 ms while in the `with` block."""

    def __init__(self, pid):
        self.pid = pid
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, resident_bytes(self.pid) or 0)
            time.sleep(0.02)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def segments_call(client, server, uri, model):
    """One ClassifySegments call through `vidclf segments`: wall seconds, peak server RSS, the
    summary line, the number of segments and the segments themselves ("predicted")."""
    with PeakResident(server.process.pid) as peak:
        start = time.perf_counter()
        done = serving.run([client, "segments", uri, "--server", server.address, "--model", model,
                            "--json"], capture_output=True, text=True)
        seconds = time.perf_counter() - start
    segments = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return {"seconds": seconds, "peak_rss": peak.peak, "summary": done.stderr.strip(),
            "segments": len(segments), "predicted": segments}


def naive_windows(client, server, uri, model, window_frames, hop_frames, duration_s=DURATION_S,
                  stride=NAIVE_STRIDE):
    """The same windows as separate Classify calls, NAIVE_CONCURRENCY at a time, each sampling
    every `stride`-th frame from its start."""
    window_s = window_frames / SAMPLE_FPS
    hop_s = hop_frames / SAMPLE_FPS
    starts = []
    start = 0.0
    while start + window_s <= duration_s + 1e-9:
        starts.append(start)
        start += hop_s

    def classify(start_s):
        serving.run([client, "classify", uri, "--server", server.address, "--model", model,
                     "--sampling", "window", "--start-seconds", f"{start_s:.3f}", "--num-frames",
                     str(window_frames), "--stride-frames", str(stride), "--json"],
                    capture_output=True, text=True)

    with PeakResident(server.process.pid) as peak:
        begin = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(NAIVE_CONCURRENCY) as pool:
            list(pool.map(classify, starts))
        seconds = time.perf_counter() - begin
    return {"seconds": seconds, "calls": len(starts), "peak_rss": peak.peak}


def decode_limit(path, config, cores, rounds):
    import python_reference as ref  # noqa: PLC0415

    crop = int(config["input"].get("crop_size", 224))
    frame_flops = 2 * ref.backbone_macs(crop)
    log("measuring the sgemm rate")
    gflops = serving.sgemm_peak(cores, repeats=10)
    log("timing one-thread decoding of every frame, and of the reference frames")
    decode_all = median([serving.decode_cpu(path, "all", 0) for _ in range(rounds)])
    decode_noref = median([serving.decode_cpu(path, "noref", 0) for _ in range(rounds)])
    sampled = DURATION_S * SAMPLE_FPS
    backbone_core_s = sampled * frame_flops / (gflops / cores * 1e9)
    return {
        "cores": cores,
        "crop_size": crop,
        "sgemm_gflops": gflops,
        "decode_all_core_s": decode_all,
        "decode_noref_core_s": decode_noref,
        "sampled_frames": sampled,
        "backbone_core_s": backbone_core_s,
        "limit_all_s": (decode_all + backbone_core_s) / cores,
        "limit_noref_s": (decode_noref + backbone_core_s) / cores,
    }


def write_report(path, data):
    limit = data["limit"]
    call = data["segments"]
    naive = data["naive"]
    lines = [
        "# Segments benchmark",
        "",
        f"Written by `make bench-segments` (bench/segments/run_benchmark.py) on {data['date']}, "
        f"{data['machine']['cores']} cores of an {data['machine']['cpu']}, model "
        f"`{data['model']}` ({limit['crop_size']}x{limit['crop_size']}, "
        f"{data['window_frames']}-frame windows every {data['hop_frames']}), "
        f"{data['rounds']} rounds taking turns; medians.",
        "",
        f"The video: {DURATION_S // 60} minutes of 1280x720 H.264 (ffmpeg's testsrc2, libx264 "
        f"veryfast, {FPS} fps, a keyframe every 2 s), pulled by the server from a file URI. "
        f"ClassifySegments samples {SAMPLE_FPS} frames/s ({limit['sampled_frames']} frames) and "
        "embeds each once.",
        "",
        "| | seconds | against the limit (all frames) | against the limit (reference frames) |",
        "|---|---|---|---|",
        f"| decode limit, every frame | {limit['limit_all_s']:.1f} | 1.00 | |",
        f"| decode limit, reference frames only (below what sampling needs) | "
        f"{limit['limit_noref_s']:.1f} | | 1.00 |",
        f"| ClassifySegments, one call | {call['seconds']:.1f} | "
        f"{call['seconds'] / limit['limit_all_s']:.2f} | "
        f"{call['seconds'] / limit['limit_noref_s']:.2f} |",
        f"| naive client: {naive['calls']} Classify calls, {NAIVE_CONCURRENCY} at once | "
        f"{naive['seconds']:.1f} | {naive['seconds'] / limit['limit_all_s']:.2f} | "
        f"{naive['seconds'] / limit['limit_noref_s']:.2f} |",
        "",
        f"The naive client took **{naive['seconds'] / call['seconds']:.1f}x** the call's time. "
        f"One-thread decoding of every frame took {limit['decode_all_core_s']:.1f} CPU s, of the "
        f"reference frames {limit['decode_noref_core_s']:.1f}; the backbone's "
        f"{limit['sampled_frames']} frames {limit['backbone_core_s']:.1f} core-seconds at "
        f"torch.mm's {limit['sgemm_gflops']:.0f} GFLOP/s over the cores.",
        "",
        f"Resident memory: {call['idle_rss'] / 1e6:.0f} MB idle (after a warm-up call, on a "
        f"server of the call's own); during the call at most **"
        f"{call['rss_above_idle'] / 1e6:.0f} MB above idle** (the larger of the rounds); the "
        f"naive client's server, at most {naive['peak_rss'] / 1e6:.0f} MB.",
        "",
        f"The call's summary: `{call['summary']}`.",
        "",
        "## Targets",
        "",
    ]
    ratio = call["seconds"] / limit["limit_all_s"]
    rss = call["rss_above_idle"]
    lines += [
        f"- at most {TARGET_LIMIT_RATIO}x the decode limit: {ratio:.2f}x of every frame's limit "
        f"({call['seconds'] / limit['limit_noref_s']:.2f}x of the reference frames'): "
        f"{serving.verdict(ratio <= TARGET_LIMIT_RATIO)}",
        f"- resident memory at most {TARGET_RSS_ABOVE_IDLE / 1e6:.0f} MB above idle: "
        f"{rss / 1e6:.0f} MB: {serving.verdict(rss <= TARGET_RSS_ABOVE_IDLE)}",
        f"- against the naive client (expected several times faster at 50% overlap): "
        f"{naive['seconds'] / call['seconds']:.1f}x",
        "",
        "Per round (seconds): ClassifySegments "
        + ", ".join(f"{r['seconds']:.1f}" for r in data["segments_rounds"])
        + "; naive " + ", ".join(f"{r['seconds']:.1f}" for r in data["naive_rounds"]) + ".",
        "",
    ]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server-binary", required=True)
    parser.add_argument("--client-binary", required=True)
    parser.add_argument("--repository", required=True)
    parser.add_argument("--model", default="demo")
    parser.add_argument("--output", required=True)
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    serving.use_blas_kernels_of_this_cpu()
    os.makedirs(args.work_dir, exist_ok=True)
    work_dir = os.path.abspath(args.work_dir)
    path = make_video(work_dir)
    uri = "file://" + path
    bundle = serving.find_bundle(args.repository, args.model)
    with open(os.path.join(bundle, "model.json"), encoding="utf-8") as f:
        config = json.load(f)
    window_frames = int(config["input"].get("num_frames", 16))
    hop_frames = window_frames // 2 if window_frames % 2 == 0 else window_frames
    cores = len(os.sched_getaffinity(0))
    data = {
        "date": datetime.date.today().isoformat(),
        "machine": serving.machine_facts(),
        "model": args.model,
        "rounds": args.rounds,
        "window_frames": window_frames,
        "hop_frames": hop_frames,
    }
    data["limit"] = decode_limit(path, config, cores, args.rounds)
    warm = os.path.join(work_dir, "warm-up.mp4")
    serving.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-i", path, "-t", "20", "-c",
                 "copy", warm])
    segments_rounds, naive_rounds = [], []
    for round_index in range(args.rounds):
        # A server of its own for each call, so that its memory is not what the naive client's
        # calls left: idle is measured after a warm-up call on a 20 s cut.
        log(f"round {round_index + 1}: ClassifySegments")
        server = serving.Server(args.server_binary, args.repository,
                                ["--allow-uri", "file://" + work_dir + "/"], "segments")
        try:
            segments_call(args.client_binary, server, "file://" + warm, args.model)
            time.sleep(2)
            idle = resident_bytes(server.process.pid)
            result = segments_call(args.client_binary, server, uri, args.model)
            result["idle_rss"] = idle
            segments_rounds.append(result)
        finally:
            server.stop()
        # Each Classify call counts the bytes it reads from the URI against --max-upload-mib:
        # the naive client's calls deep into the 180 MB file need more than the default 64.
        log(f"round {round_index + 1}: the naive client")
        server = serving.Server(args.server_binary, args.repository,
                                ["--allow-uri", "file://" + work_dir + "/", "--max-upload-mib",
                                 str(NAIVE_UPLOAD_MIB)], "naive")
        try:
            naive_rounds.append(naive_windows(args.client_binary, server, uri, args.model,
                                              window_frames, hop_frames))
        finally:
            server.stop()
    data["segments_rounds"] = segments_rounds
    data["naive_rounds"] = naive_rounds
    data["segments"] = {
        "seconds": median([r["seconds"] for r in segments_rounds]),
        "rss_above_idle": max(r["peak_rss"] - r["idle_rss"] for r in segments_rounds),
        "idle_rss": median([r["idle_rss"] for r in segments_rounds]),
        "summary": segments_rounds[-1]["summary"],
    }
    data["naive"] = {
        "seconds": median([r["seconds"] for r in naive_rounds]),
        "calls": naive_rounds[0]["calls"],
        "peak_rss": max(r["peak_rss"] for r in naive_rounds),
    }
    write_report(args.output, data)
    with open(os.path.join(work_dir, "results.json"), "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)
    log(f"wrote {args.output}")


if __name__ == "__main__":
    main()
