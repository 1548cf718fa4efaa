#!/usr/bin/python3
"""Live streams against one vidclf-server: how many real-time camera feeds it keeps up with.

Each feed is a 25 fps 320x240 H.264 file sent by `vidclf stream --realtime`, as a camera sends,
with a prediction per embedded frame. A level runs N feeds at once for the file's length; it is
kept up with when every feed got every frame embedded and its updates stayed within a second of
the frames' arrival (p99). Then, in the same run: feeds sent as fast as the server takes them,
against the backbone's own batched throughput; memory per feed on a fresh server; and the cost of
one more frame for a head's recurrent step against re-running softmax over the history. Writes a
Markdown report, keeping the sections of the page already there that it does not write itself.

Usage: run_benchmark.py --server BIN --client BIN --backbone-bench BIN --step-bench BIN
                        --model-repository DIR --output docs/...md
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile
import time
import urllib.request

import container_latency


def percentile(values, q):
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def metric(metrics_port, name):
    page = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read()
    match = re.search(rb"^" + name.encode() + rb" (\S+)", page, re.M)
    return float(match.group(1))


def resident_bytes(metrics_port):
    return metric(metrics_port, "process_resident_memory_bytes")


# The thread settings the server starts itself with (server/main.cc), for the step benchmarks.
SERVER_THREADS = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", OPENBLAS_NUM_THREADS="1")


def cpu_model():
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "an unnamed CPU"


def per_frame_ms(table, column=4):
    """{streams: ms per frame} from vidclf-step-bench's --streams table: the causal-linear head's
    with float32 weights (column 4), or with int8 step weights (column 7)."""
    rows = {}
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if cells[0].isdigit():
            rows[int(cells[0])] = float(cells[column])
    return rows


def per_frame_summary(streams_together):
    """What a frame of the causal-linear head costs, and with how many streams it is under 1 ms."""
    parts = []
    for threads, table in sorted(streams_together.items()):
        rows = per_frame_ms(table)
        under = [streams for streams, ms in sorted(rows.items()) if ms <= 1.0]
        costs = ", ".join(f"{ms:.2f} ms at {streams}" for streams, ms in sorted(rows.items())
                          if streams > 1)
        int8 = per_frame_ms(table, column=7)
        int8_under = [streams for streams, ms in sorted(int8.items()) if ms <= 1.0]
        parts.append(
            f"With {threads} intra-op thread{'s' if threads > 1 else ''}, a frame of the 6-layer "
            f"causal-linear head costs **{rows[1]:.2f} ms for one stream alone**, and {costs} "
            "streams stepped together: the target of at most 1 ms per frame holds "
            + (f"with {', '.join(map(str, under))} streams." if under
               else "at none of these levels.")
            + f" With int8 step weights (`--stream-step-weights int8`), **{int8[1]:.2f} ms "
            "alone**; at most 1 ms "
            + (f"with {', '.join(map(str, int8_under))} streams." if int8_under
               else "at none of these levels."))
    return " ".join(parts) + (
        " The server's head threads run with as many intra-op threads as cores unless "
        "`--head-intra-op-threads` says otherwise.")


def make_feed(path, seconds):
    """Writes this page's camera feed: `seconds` of 25 fps 320x240 H.264, a keyframe a second."""
    subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                    "testsrc2=size=320x240:rate=25", "-t", str(seconds), "-c:v", "libx264",
                    "-tune", "zerolatency", "-g", "25", "-pix_fmt", "yuv420p", path], check=True)


def backbone_frames_per_s(binary):
    """The backbone's own batched throughput at the demo model's size, in the server's layout."""
    out = subprocess.run([binary, "--sizes", "112", "--batches", "16", "--threads",
                          str(os.cpu_count()), "--rounds", "5"], check=True,
                         capture_output=True, text=True).stdout
    row = next(line for line in out.splitlines() if "fp32 channels-last" in line)
    return float(row.split("|")[5])


def saturated(client, grpc_port, metrics_port, feed, streams):
    """Feeds sent as fast as the server takes them, every frame embedded: frames embedded per s."""
    before = metric(metrics_port, "vidclf_stream_frames_total")
    started = time.monotonic()
    clients = [subprocess.Popen([client, "stream", feed, "--server", f"127.0.0.1:{grpc_port}",
                                 "--json", "--emit-every-frames", "25"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for _ in range(streams)]
    failures = sum(process.wait() != 0 for process in clients)
    elapsed = time.monotonic() - started
    frames = metric(metrics_port, "vidclf_stream_frames_total") - before
    return {"streams": streams, "frames": frames, "seconds": elapsed,
            "per_s": frames / elapsed, "failures": failures}


def stop_server(server):
    server.terminate()
    server.wait(timeout=60)


def start_server(binary, repository, extra_args=()):
    server = subprocess.Popen([binary, "--model-repository", repository, "--host", "127.0.0.1",
                               "--grpc-port", "0", "--metrics-port", "0", "--max-streams", "256",
                               *extra_args],
                              stdout=subprocess.PIPE, text=True)
    output = ""
    while not ("gRPC listening" in output and "metrics on" in output):
        line = server.stdout.readline()
        if not line:
            raise RuntimeError(f"server did not start:\n{output}")
        output += line
    grpc_port = int(re.search(r"gRPC listening on [\d.]+:(\d+)", output).group(1))
    metrics_port = int(re.search(r"metrics on http://[\d.]+:(\d+)/", output).group(1))
    return server, grpc_port, metrics_port


def run_level(client, grpc_port, metrics_port, feed, streams, stride, frames):
    started = time.monotonic()
    clients = [subprocess.Popen([client, "stream", feed, "--server", f"127.0.0.1:{grpc_port}",
                                 "--realtime", "--json", "--embed-stride", str(stride)],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
               for _ in range(streams)]
    # Memory while every feed is open, halfway through.
    time.sleep(frames / 25 / 2)
    rss_during = resident_bytes(metrics_port)
    # Steady state: updates for frames after a feed's first second. The first ones also wait for
    # the server to recognise the container (libavformat probes the first packets).
    latencies, first_latencies, finals, failures = [], [], [], 0
    for process in clients:
        out, _ = process.communicate()
        predictions = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        if process.returncode != 0 or not predictions:
            failures += 1
            continue
        latencies += [p["latency_ms"] for p in predictions if p["last_seconds"] >= 1.0]
        first_latencies.append(predictions[0]["latency_ms"])
        finals.append(int(predictions[-1]["frames_embedded"]))
    elapsed = time.monotonic() - started
    wanted = (frames + stride - 1) // stride
    p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
    kept_up = failures == 0 and all(f == wanted for f in finals) and p99 < 1000
    return {"streams": streams, "stride": stride, "p50": p50, "p99": p99,
            "first": statistics.median(first_latencies) if first_latencies else float("nan"),
            "failures": failures,
            "complete": sum(f == wanted for f in finals), "elapsed": elapsed,
            "embedded_per_s": streams * wanted / (frames / 25), "rss_during": rss_during,
            "kept_up": kept_up}


def sections(lines):
    """Splits a Markdown page into [heading, lines] pairs at its "## " headings (None: the top)."""
    parts = [[None, []]]
    for line in lines:
        if line.startswith("## "):
            parts.append([line, []])
        parts[-1][1].append(line)
    return parts


def with_written_sections(path, lines):
    """`lines`, with the sections of the page at `path` that this script does not write.

    Other commands' results and measured notes live on this page under headings of their own; each
    goes back after the section it followed, or at the end when that section is gone.
    """
    try:
        with open(path) as page:
            old = sections(page.read().splitlines())
    except FileNotFoundError:
        return lines
    new = sections(lines)
    written = {heading for heading, _ in new}
    kept = {}  # the heading a kept section followed -> the kept sections, in order
    previous = None
    for heading, body in old:
        if heading in written:
            previous = heading
        else:
            kept.setdefault(previous, []).append(body)
    out = []
    for heading, body in new:
        out += body
        for kept_body in kept.pop(heading, []):
            out += kept_body
    for bodies in kept.values():
        for kept_body in bodies:
            out += kept_body
    if out and out[-1]:
        out.append("")
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True)
    parser.add_argument("--client", required=True)
    parser.add_argument("--backbone-bench", required=True)
    parser.add_argument("--step-bench", required=True)
    parser.add_argument("--model-repository", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--levels", default="1,2,4,6,8,12,16,24,32")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="vidclf-streaming-")
    feed = os.path.join(work, "camera.mp4")
    make_feed(feed, args.seconds)
    frames = 25 * args.seconds
    server, grpc_port, metrics_port = start_server(args.server, args.model_repository)
    began = time.strftime("%Y-%m-%d %H:%M")
    run_start = time.monotonic()
    try:
        # Warm up: one short feed, then idle memory.
        run_level(args.client, grpc_port, metrics_port, feed, 1, 1, frames)
        time.sleep(5)
        idle = resident_bytes(metrics_port)
        results = []
        for stride in (1, 4):
            for streams in [int(level) for level in args.levels.split(",")]:
                result = run_level(args.client, grpc_port, metrics_port, feed, streams, stride,
                                   frames)
                results.append(result)
                print(json.dumps(result), flush=True)
                if not result["kept_up"]:
                    break  # the next levels would not keep up either
        # Streaming machinery against the backbone alone, side by side: backbone, feeds, backbone.
        backbone = [backbone_frames_per_s(args.backbone_bench)]
        saturation = saturated(args.client, grpc_port, metrics_port, feed, 8)
        print(json.dumps(saturation), flush=True)
        backbone.append(backbone_frames_per_s(args.backbone_bench))
        containers = container_latency.measure(f"127.0.0.1:{grpc_port}", feed, 10, 3, work)
        print(json.dumps(containers), flush=True)
    finally:
        stop_server(server)

    # Memory per feed, on a fresh server: resident memory with 4 and then 16 feeds open (every
    # 4th frame embedded, which it keeps up with), the difference over the 12 more feeds.
    server, grpc_port, metrics_port = start_server(args.server, args.model_repository)
    try:
        run_level(args.client, grpc_port, metrics_port, feed, 1, 4, frames)
        time.sleep(5)
        fresh_idle = resident_bytes(metrics_port)
        memory = {n: run_level(args.client, grpc_port, metrics_port, feed, n, 4, frames)
                  for n in (4, 16)}
    finally:
        stop_server(server)
    per_feed = (memory[16]["rss_during"] - memory[4]["rss_during"]) / 12
    print(json.dumps({"idle": fresh_idle, "per_feed": per_feed}), flush=True)

    def step_bench(*flags):
        return subprocess.run([args.step_bench, *flags], check=True, capture_output=True,
                              text=True, env=SERVER_THREADS).stdout

    steps = step_bench("--threads", str(os.cpu_count()))
    steps_one_thread = step_bench("--threads", "1", "--frames", "10,1000")
    streams_together = {
        threads: step_bench("--threads", str(threads), "--frames", "",
                            "--streams", "1,2,4,8,16,32")
        for threads in (os.cpu_count(), 1)}

    lines = [
        "# Streaming benchmark: real-time camera feeds against one vidclf-server",
        "",
        f"Written by `make bench-streaming` (bench/streaming/run_benchmark.py) on {began}; the run "
        f"took {(time.monotonic() - run_start) / 60:.0f} minutes. Every number below comes from "
        "that one run, on this machine's cores (`nproc`: "
        f"{os.cpu_count()}, {cpu_model()}), with the client processes on the same machine.",
        "",
        f"Each feed is a {args.seconds} s 25 fps 320x240 H.264 file (`-tune zerolatency -g 25`) "
        "sent by `vidclf stream FILE --realtime --json`, which remuxes it to live Matroska and "
        "sends each packet at its time, as a camera would; the server embeds every frame "
        "(stride 1) or every 4th (stride 4) and answers once per embedded frame. Latency is the "
        "server's "
        "`latency_ms`: from the arrival of the newest frame's bytes to the prediction being "
        "handed to gRPC; p50 and p99 are over the updates for frames after each feed's first "
        "second, and the first update's latency (which includes recognising the container) is "
        "shown apart, as the median over the feeds. A level is kept up with when every feed got "
        "every frame embedded and the p99 update latency stayed under 1 s. Levels rise until one "
        "is not kept up with.",
        "",
        f"Model: the demo model (GRU head, 112x112 crops). Idle resident memory after a warm-up "
        f"feed: {idle / 1e6:.0f} MB. Resident memory is read halfway through each level; it also "
        "holds what earlier levels left in the allocator's caches, so it bounds memory per feed "
        "from above rather than measuring it.",
        "",
        "| stride | feeds | kept up | feeds complete | frames to embed per s | p50 update ms | "
        "p99 update ms | first update ms | RSS during (MB) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(f"| {r['stride']} | {r['streams']} | {'yes' if r['kept_up'] else 'no'} | "
                     f"{r['complete']} of {r['streams']} | {r['embedded_per_s']:.0f} | "
                     f"{r['p50']:.0f} | {r['p99']:.0f} | {r['first']:.0f} | "
                     f"{r['rss_during'] / 1e6:.0f} |")
    for stride in (1, 4):
        kept = [r["streams"] for r in results if r["stride"] == stride and r["kept_up"]]
        lines.append("")
        lines.append(f"Most feeds kept up with, embedding every {'' if stride == 1 else '4th '}"
                     f"frame: **{max(kept) if kept else 0}**.")
    backbone_rate = statistics.median(backbone)
    lines += [
        "",
        "## Streaming machinery against the backbone alone",
        "",
        f"{saturation['streams']} feeds sent as fast as the server takes them (no `--realtime`), "
        "every frame embedded, a prediction every 25: the server embedded "
        f"{saturation['frames']:.0f} frames in {saturation['seconds']:.1f} s, "
        f"**{saturation['per_s']:.0f} frames/s** ({saturation['failures']} feeds failed). The "
        "backbone alone (`vidclf-backbone-bench --sizes 112 --batches 16`, channels-last fp32, "
        f"the same threads), run just before and just after: {backbone[0]:.0f} and "
        f"{backbone[1]:.0f} frames/s. Ratio: **{saturation['per_s'] / backbone_rate:.2f}** of "
        "the backbone's own throughput (target: at least 0.85). The feeds' decoding, conversion "
        "and heads share the same cores, so this ratio is what streaming costs all told.",
        "",
        "## A lone feed's update latency by container",
        "",
        "The same 10 s of the feed's frames written by the ffmpeg CLI as MPEG-TS (as FFmpeg and "
        "most cameras write it, without the length of the video's PES packets), as MPEG-TS with "
        "that length (`-omit_video_pes_length 0`), and as Matroska, each sent alone by grpcio to "
        "the same server: each frame's bytes at its time, every frame embedded "
        "(bench/streaming/container_latency.py). p50 update latency after the first second, ms, "
        "one value per round, the containers taking turns:",
        "",
        "| container | p50 update ms, by round |",
        "|---|---|",
    ] + [f"| {name} | {', '.join(f'{ms:.0f}' for ms in rounds)} |"
         for name, rounds in containers.items()] + [
        "",
        "The MPEG-TS demuxer ends a PES packet whose length is not written only when the next one "
        "starts, and the H.264 parser ends a frame only at the next one's start: each holds a "
        "frame for a frame period (40 ms). Matroska's blocks say how long they are, so a frame "
        "leaves the demuxer once its last byte is in; `vidclf stream` sends Matroska for this "
        "reason.",
        "",
        "## Memory per feed",
        "",
        f"A fresh server, after one warm-up feed: {fresh_idle / 1e6:.0f} MB resident when idle. "
        f"With 4 real-time feeds open (every 4th frame embedded): "
        f"{memory[4]['rss_during'] / 1e6:.0f} MB; with 16: {memory[16]['rss_during'] / 1e6:.0f} "
        f"MB. Each feed past the first four cost **{per_feed / 1e6:.1f} MB**: its decoder, its "
        "bounded buffers (at most 8 MiB of bytes, 32 frames between decoder and head), its head "
        "state and its share of the batches.",
        "",
        "## One more frame: recurrent step against re-running softmax",
        "",
        "`vidclf-step-bench` (bench/streaming/step_benchmark.cc): the time to take one more "
        "frame after n frames seen, for a GRU head with seed 004's sizes (hidden 32, 2 layers), a "
        "6-layer transformer (d_model 512, 8 heads) with causal-linear attention stepping its O(1) "
        "state, and the same transformer with softmax attention re-run over the whole history, "
        "which is what an exact answer costs a head without a recurrent step. Medians of 9 rounds "
        "(3 for softmax over 10,000 frames), seeded random weights and inputs, with as many "
        f"intra-op threads as cores ({os.cpu_count()}):",
        "",
    ] + steps.strip().splitlines() + [
        "",
        "A step of the causal-linear head reads each of its weights once (about 25 MFLOP of "
        "matrix-vector products against 48 MiB), so it costs at least what reading as many bytes "
        "from memory costs: the column beside it, timed in the same rounds. A stream's one new "
        "frame goes through each linear layer in a kernel that reads each weight row once, in "
        "AVX-512 or AVX2 where the CPU has them (model/heads/row_kernels.h), and through "
        "attention in a written-out step (`CausalLinearAttention::forward_one_frame_each`). The steps "
        "run in the server's thread settings "
        "(`OMP_WAIT_POLICY=PASSIVE`, `OPENBLAS_NUM_THREADS=1`), where a second intra-op thread "
        "sleeps between operations and costs a wake-up at each. The same heads with one intra-op "
        "thread:",
        "",
    ] + steps_one_thread.strip().splitlines() + [
        "",
        "## Many streams stepped together",
        "",
        "The server steps the heads of the streams that have a frame ready at the same time "
        "together (server/engine/head_stepper.h; `vidclf_stream_head_step_streams` on /metrics "
        "counts them): one `VideoModel::StreamStepEach` over their states, each stream at its "
        "own position, so the head's weights are read once for all of them; attention reads and "
        "writes each stream's state where it lies. "
        "`vidclf-step-bench --streams 1,2,4,8,16,32`: B streams, stream b having seen 10 + 37b "
        "frames, each take one new frame; medians of 9 rounds. The last two columns step the "
        "same head with int8 copies of its weights (`--stream-step-weights int8`, see below), "
        "in rounds of their own right after the float32 head's. With as many intra-op threads as "
        f"cores ({os.cpu_count()}):",
        "",
    ] + streams_together[os.cpu_count()].strip().splitlines() + [
        "",
        "With one intra-op thread:",
        "",
    ] + streams_together[1].strip().splitlines() + [
        "",
        per_frame_summary(streams_together),
    ]
    lines.append("")
    lines = with_written_sections(args.output, lines)
    with open(args.output, "w") as report:
        report.write("\n".join(lines))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
