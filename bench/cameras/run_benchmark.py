#!/usr/bin/python3
"""Registered RTSP cameras against one vidclf-server: how many it keeps up with, how fast they
come back after a restart, and what they cost in memory, over time.

The cameras are Debian's gst-rtsp-server (tests/integration/rtsp_camera.py --loop): each sends a
pre-encoded H.264 clip (a keyframe a second) in a loop at 25 fps without encoding anything, so
that the cameras cost little beside the server. Every frame is decoded and every 5th embedded
(5 fps), predictions heard through Subscribe. A level of N cameras is kept up with when, after a
warm-up, the p99 lag of predictions behind real time (from the arrival of the newest frame's
bytes to the prediction; and the media time against the wall clock, per camera) stays under 1 s
and every camera delivers at least 24 frames a second. In the same run: the decode-only limit of
the same clip (the ffmpeg CLI on every core), the restart of a server with 24 registered cameras
(SIGTERM, then the time until each predicts again), memory per registered and per live camera,
and resident memory over a soak with kills and freezes injected, and per reconnect over a loop of
kills (--parts reconnects). Writes docs/cameras-benchmark.md.
Usage: run_benchmark.py --server BIN --repository DIR --output docs/cameras-benchmark.md
                        [--seconds S] [--soak-minutes M] [--soak-embed-stride N]
                        [--levels-320 16,32,...]
"""
import argparse
import importlib.util
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import grpc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, os.path.join(ROOT, "bench", "streaming"))
import rtsp_camera  # noqa: E402


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The live-stream benchmark's percentile and CPU name, so that the two pages read alike.
streaming = load("streaming_benchmark", os.path.join(ROOT, "bench", "streaming", "run_benchmark.py"))
percentile, cpu_model = streaming.percentile, streaming.cpu_model


def generate_messages(out_dir):
    subprocess.run(["protoc", f"--proto_path={os.path.join(ROOT, 'proto')}",
                    f"--python_out={out_dir}", "vidclf/v1/video_classifier.proto",
                    "vidclf/v1/sources.proto"], check=True)
    for package in ("vidclf", "vidclf/v1"):
        open(os.path.join(out_dir, package, "__init__.py"), "a").close()
    sys.path.insert(0, out_dir)
    from vidclf.v1 import sources_pb2, video_classifier_pb2
    return sources_pb2, video_classifier_pb2


def make_clip(path, width, height):
    """10 s of 25 fps H.264, a keyframe a second, no B-frames, an access unit delimiter each."""
    subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                    f"testsrc2=size={width}x{height}:rate=25", "-t", "10", "-c:v", "libx264",
                    "-preset", "veryfast", "-g", "25", "-bf", "0", "-pix_fmt", "yuv420p",
                    "-bsf:v", "h264_metadata=aud=insert", "-f", "h264", path], check=True)


def decode_limit(clip):
    """Cameras of this clip the ffmpeg CLI decodes in real time on every core: one decoder
    thread per process, as the server decodes each feed, a process per core."""
    cores = os.cpu_count()
    # Six loops of the clip in one file: each starts with its parameter sets and a keyframe.
    looped = clip + ".x6"
    with open(clip, "rb") as source, open(looped, "wb") as out:
        out.write(source.read() * 6)
    started = time.monotonic()
    processes = [subprocess.Popen(["ffmpeg", "-nostdin", "-loglevel", "error", "-threads", "1",
                                   "-f", "h264", "-i", looped, "-f", "null", "-"])
                 for _ in range(cores)]
    if any(process.wait() != 0 for process in processes):
        raise RuntimeError("ffmpeg could not decode the clip")
    seconds = time.monotonic() - started
    frames = cores * 6 * 250
    return frames / seconds / 25


class Server:
    def __init__(self, binary, repository, port, *flags):
        self.process = subprocess.Popen(
            [binary, "--model-repository", repository, "--host", "127.0.0.1", "--grpc-port", "0",
             "--metrics-port", "0", "--allow-uri", f"rtsp://127.0.0.1:{port}/", *flags],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        output = ""
        while not ("gRPC listening" in output and "metrics on" in output):
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError(f"the server did not start:\n{output}")
            output += line
        self.grpc_port = int(re.search(r"gRPC listening on [\d.]+:(\d+)", output).group(1))
        self.metrics_port = int(re.search(r"metrics on http://[\d.]+:(\d+)/", output).group(1))
        threading.Thread(target=lambda: [None for _ in self.process.stdout], daemon=True).start()
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.grpc_port}")

    def call(self, method, request, response_type):
        stub = self.channel.unary_unary(f"/vidclf.v1.Sources/{method}",
                                        request_serializer=type(request).SerializeToString,
                                        response_deserializer=response_type.FromString)
        return stub(request, timeout=60)

    def subscribe(self):
        stub = self.channel.unary_stream("/vidclf.v1.Sources/Subscribe",
                                         request_serializer=PB.SubscribeRequest.SerializeToString,
                                         response_deserializer=PB.SourceUpdate.FromString)
        return stub(PB.SubscribeRequest())

    def metrics(self):
        return urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                      timeout=10).read()

    def resident_mib(self):
        match = re.search(rb"^process_resident_memory_bytes (\S+)", self.metrics(), re.M)
        return float(match.group(1)) / (1 << 20)

    def largest_lag_seconds(self):
        """The largest lag of a camera's media time behind the wall clock, now."""
        lags = re.findall(rb"^vidclf_source_lag_seconds{[^}]*} (\S+)", self.metrics(), re.M)
        return max((float(lag) for lag in lags), default=0.0)

    def stop(self, sig=signal.SIGTERM):
        self.channel.close()
        self.process.send_signal(sig)
        self.process.wait(timeout=60)


def add_cameras(server, camera_port, count, model, paused=False, embed_stride=5):
    for number in range(count):
        server.call("CreateSource", PB.CreateSourceRequest(
            source_id=f"cam{number}", source=PB.Source(
                uri=f"rtsp://127.0.0.1:{camera_port}/cam{number}", paused=paused,
                input_options={"rtsp_transport": "tcp"},
                config=VC.StreamConfig(model=model, embed_stride=embed_stride))), PB.Source)


def listen(server, seconds_total, warmup):
    """Predictions heard through Subscribe for `seconds_total`, those after `warmup` kept:
    (latency seconds, lag of media time behind the wall clock per camera) of each."""
    updates = server.subscribe()
    started = time.monotonic()
    latencies, offsets = [], {}
    timer = threading.Timer(seconds_total, updates.cancel)
    timer.start()
    try:
        for update in updates:
            if not update.HasField("prediction"):
                continue
            now = time.monotonic()
            if now - started < warmup:
                continue
            prediction = update.prediction
            latencies.append(prediction.latency_ms / 1e3)
            # Wall clock less media time: constant while a camera is followed at its pace.
            offsets.setdefault(update.name, []).append(now - prediction.last_seconds)
    except grpc.RpcError:
        pass
    timer.cancel()
    # How far each prediction fell behind the best pace its camera was followed at.
    lags = [offset - min(series) for series in offsets.values() for offset in series]
    return latencies, lags


def run_level(args, clip, count, model):
    camera = rtsp_camera.CameraProcess(loop=clip, cameras=count).start()
    server = Server(args.server, args.repository, camera.port, "--max-streams", str(count + 4),
                    *args.server_flag)
    try:
        add_cameras(server, camera.port, count, model)
        latencies, lags = listen(server, args.warmup + args.seconds, args.warmup)
        sources = server.call("ListSources", PB.ListSourcesRequest(page_size=1000),
                              PB.ListSourcesResponse).sources
        fps = [source.status.frames_per_second for source in sources]
        resident = server.resident_mib()
    finally:
        server.stop()
        camera.kill()
    # The media-time lag grows when the server falls behind; its spread at a steady pace is the
    # jitter of delivery. Kept up: p99 of both under 1 s, and every camera at >= 24 fps.
    p99_latency, p99_lag = percentile(latencies, 0.99), percentile(lags, 0.99)
    kept_up = p99_latency < 1 and p99_lag < 1 and min(fps) >= 24
    return {"cameras": count, "model": model, "p50_latency": percentile(latencies, 0.5),
            "p99_latency": p99_latency, "p99_lag": p99_lag, "min_fps": min(fps),
            "predictions": len(latencies), "resident": resident, "kept_up": kept_up}


def connection_seconds(camera_port):
    """What the ffmpeg CLI takes to open one camera and decode its first frame: the cameras' own
    part of coming back."""
    started = time.monotonic()
    try:
        subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-rtsp_transport", "tcp", "-i",
                        f"rtsp://127.0.0.1:{camera_port}/cam0", "-frames:v", "1", "-f", "null",
                        "-"], capture_output=True, check=True, timeout=30)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
        return float("nan")
    return time.monotonic() - started


def restart(args, clip, count, model):
    """SIGTERM to a server following `count` cameras, started again on the same --state-dir:
    seconds from the new process to each camera's first prediction, and how many resumed."""
    camera = rtsp_camera.CameraProcess(loop=clip, cameras=count).start()
    state_dir = tempfile.mkdtemp(prefix="cameras-state-")
    flags = ("--max-streams", str(count + 4), "--state-dir", state_dir, *args.server_flag)
    try:
        connect = statistics.median(connection_seconds(camera.port) for _ in range(5))
        server = Server(args.server, args.repository, camera.port, *flags)
        add_cameras(server, camera.port, count, model)
        listen(server, 15, 15)
        server.stop()
        started = time.monotonic()
        server = Server(args.server, args.repository, camera.port, *flags)
        ready = time.monotonic() - started
        updates = server.subscribe()
        back = {}
        timer = threading.Timer(60, updates.cancel)
        timer.start()
        try:
            for update in updates:
                if update.HasField("prediction") and update.name not in back:
                    back[update.name] = time.monotonic() - started
                    if len(back) == count:
                        break
        except grpc.RpcError:
            pass
        timer.cancel()
        updates.cancel()
        sources = server.call("ListSources", PB.ListSourcesRequest(page_size=1000),
                              PB.ListSourcesResponse).sources
        resumed = sum(source.status.resumed for source in sources)
        server.stop()
    finally:
        camera.kill()
    return {"cameras": count, "back": len(back), "median": statistics.median(back.values()),
            "max": max(back.values()), "resumed": resumed, "connect": connect,
            "ready": ready}


def memory(args, clip, count, model):
    """Resident memory idle, with `count` cameras registered paused, and with them live."""
    camera = rtsp_camera.CameraProcess(loop=clip, cameras=count).start()
    server = Server(args.server, args.repository, camera.port, "--max-streams", str(count + 4),
                    *args.server_flag)
    try:
        time.sleep(5)
        idle = server.resident_mib()
        add_cameras(server, camera.port, count, model, paused=True)
        time.sleep(5)
        registered = server.resident_mib()
        for number in range(count):
            request = PB.UpdateSourceRequest(source=PB.Source(name=f"sources/cam{number}"))
            request.update_mask.paths.append("paused")
            server.call("UpdateSource", request, PB.Source)
        time.sleep(30)
        live = server.resident_mib()
    finally:
        server.stop()
        camera.kill()
    return {"cameras": count, "idle": idle, "per_registered": (registered - idle) / count,
            "per_live": (live - registered) / count}


def soak(args, clip, count, model):
    """`count` cameras for --soak-minutes, a freeze of three cameras for 20 s or a kill of every
    camera for 10 s every two minutes, in turn; resident memory every 10 s, and the largest lag
    just before each fault (when every camera has been back for a while)."""
    camera = rtsp_camera.CameraProcess(loop=clip, cameras=count).start()
    port = camera.port
    server = Server(args.server, args.repository, port, "--max-streams", str(count + 4),
                    *args.server_flag)
    samples, lags, injected, started = [], [], 0, time.monotonic()
    try:
        add_cameras(server, port, count, model, embed_stride=args.soak_embed_stride)
        next_fault = started + 120
        while time.monotonic() - started < args.soak_minutes * 60:
            time.sleep(10)
            samples.append((time.monotonic() - started, server.resident_mib()))
            if time.monotonic() >= next_fault:
                lags.append(server.largest_lag_seconds())
                injected += 1
                if injected % 2:
                    for number in range(3):
                        camera.command(f"freeze {number}")
                    time.sleep(20)
                    for number in range(3):
                        camera.command(f"thaw {number}")
                else:
                    camera.kill()
                    time.sleep(10)
                    camera = rtsp_camera.CameraProcess(loop=clip, cameras=count, port=port).start()
                next_fault += 120
        time.sleep(30)  # every camera back
        sources = server.call("ListSources", PB.ListSourcesRequest(page_size=1000),
                              PB.ListSourcesResponse).sources
        live = sum(source.status.state == PB.SourceStatus.LIVE for source in sources)
        failed = sum(source.status.state == PB.SourceStatus.FAILED for source in sources)
        reconnects = sum(source.status.reconnects for source in sources)
    finally:
        server.stop()
        camera.kill()
    # The slope of the second half, past warm-up, by least squares, in MiB per hour.
    half = samples[len(samples) // 2:]
    mean_t = statistics.mean(t for t, _ in half)
    mean_r = statistics.mean(r for _, r in half)
    slope = (sum((t - mean_t) * (r - mean_r) for t, r in half) /
             max(1e-9, sum((t - mean_t) ** 2 for t, _ in half)))
    return {"cameras": count, "minutes": args.soak_minutes, "faults": injected,
            "first": samples[0][1], "last": samples[-1][1], "peak": max(r for _, r in samples),
            "slope_per_hour": slope * 3600, "live": live, "failed": failed,
            "reconnects": reconnects, "freezes": (injected + 1) // 2, "kills": injected // 2,
            "embed_stride": args.soak_embed_stride, "lag_median": statistics.median(lags),
            "lag_max": max(lags)}


def reconnects(args, clip, count, model):
    """`count` cameras, all killed for 3 s and back for 7 s, --reconnect-cycles times: resident
    memory after each cycle, and its slope per reconnect over the last two thirds."""
    camera = rtsp_camera.CameraProcess(loop=clip, cameras=count).start()
    port = camera.port
    server = Server(args.server, args.repository, port, "--max-streams", str(count + 4),
                    *args.server_flag)
    samples = []
    try:
        add_cameras(server, port, count, model)
        time.sleep(20)
        for _ in range(args.reconnect_cycles):
            camera.kill()
            time.sleep(3)
            camera = rtsp_camera.CameraProcess(loop=clip, cameras=count, port=port).start()
            time.sleep(7)
            samples.append(server.resident_mib())
        sources = server.call("ListSources", PB.ListSourcesRequest(page_size=1000),
                              PB.ListSourcesResponse).sources
        total = sum(source.status.reconnects for source in sources)
    finally:
        server.stop()
        camera.kill()
    tail = samples[len(samples) // 3:]
    xs = range(len(tail))
    mean_x, mean_r = statistics.mean(xs), statistics.mean(tail)
    slope = (sum((x - mean_x) * (r - mean_r) for x, r in zip(xs, tail)) /
             max(1e-9, sum((x - mean_x) ** 2 for x in xs)))
    return {"cameras": count, "cycles": args.reconnect_cycles, "reconnects": total,
            "first": samples[0], "third": tail[0], "last": samples[-1],
            "per_reconnect_kib": 1024 * slope / count}


def report(args, results):
    lines = [
        "# Registered cameras on one server",
        "",
        f"`make bench-cameras` on this machine ({os.cpu_count()} cores, {cpu_model()}), the "
        "cameras (Debian's gst-rtsp-server, `tests/integration/rtsp_camera.py --loop`, each "
        "sending a pre-encoded 25 fps H.264 clip with a keyframe a second in a loop, over RTSP "
        "on TCP) and the subscriber on the same machine. Every frame is decoded and every 5th "
        "embedded (5 fps); the demo models (112x112). A level is kept up with when, after "
        f"{args.warmup} s of warm-up and over {args.seconds} s, the p99 latency from a frame's "
        "arrival to its prediction and the p99 lag of the cameras' media time behind the wall "
        "clock both stay under 1 s, and every camera delivers at least 24 frames a second.",
        "",
        f"Command: `{' '.join(sys.argv)}`.",
    ]
    if results["levels"]:
        lines += [
            "", "## Cameras kept up with", "",
            "| size | model | cameras | p50 latency ms | p99 latency ms | p99 lag behind pace s | "
            "slowest camera fps | resident MiB | kept up |",
            "|---|---|---|---|---|---|---|---|---|"]
    for size, rows in results["levels"].items():
        for row in rows:
            lines.append(
                f"| {size} | {row['model']} | {row['cameras']} | {1e3 * row['p50_latency']:.0f} | "
                f"{1e3 * row['p99_latency']:.0f} | {row['p99_lag']:.2f} | {row['min_fps']:.1f} | "
                f"{row['resident']:.0f} | {'yes' if row['kept_up'] else 'no'} |")
    if results["decode_limit"]:
        lines += ["", "The decode-only limit, the ffmpeg CLI decoding the same clip with one "
                  "thread per process on every core, in real-time cameras:", ""]
    for size, limit in results["decode_limit"].items():
        if not results["levels"][size]:
            lines.append(f"- {size}: **{limit:.0f} cameras**.")
            continue
        kept = [row["cameras"] for row in results["levels"][size] if row["kept_up"]]
        best = max(kept) if kept else 0
        lines.append(f"- {size}: **{limit:.0f} cameras**; the most kept up with here, {best}, is "
                     f"**{best / limit:.2f}** of it.")
    if "restart" in results:
        r = results["restart"]
        lines += ["", "## Restart", "",
                  f"{r['cameras']} cameras registered in a `--state-dir`, the server stopped with "
                  "SIGTERM and started again: from the new process to each camera's first "
                  f"prediction, median **{r['median']:.2f} s**, max **{r['max']:.2f} s** "
                  f"({r['back']} of {r['cameras']} back); the server itself took "
                  f"{r['ready']:.2f} s to listen (its models loaded), and the ffmpeg CLI takes "
                  f"{r['connect']:.2f} s to open one camera and decode its first frame; "
                  f"**{r['resumed']}** "
                  "resumed their head's state from the drain's checkpoint."]
    if "memory" in results:
        m = results["memory"]
        lines += ["", "## Memory", "",
                  f"Idle server {m['idle']:.0f} MiB resident; each registered (paused) camera "
                  f"**{1024 * m['per_registered']:.0f} KiB**, each live one "
                  f"**{m['per_live']:.2f} MiB** more ({m['cameras']} cameras, 320x240)."]
    if "soak" in results:
        s = results["soak"]
        lines += ["", "## Soak", "",
                  f"{s['cameras']} cameras for {s['minutes']} minutes, every "
                  f"{s['embed_stride']}th frame embedded, {s['faults']} faults injected (in "
                  "turn: three cameras frozen for 20 s; every camera killed for "
                  f"10 s): resident memory {s['first']:.0f} MiB at the first sample, "
                  f"{s['last']:.0f} at the last, {s['peak']:.0f} at its peak; slope over the "
                  f"second half **{s['slope_per_hour']:.1f} MiB/hour**. At the end {s['live']} "
                  f"cameras were LIVE and {s['failed']} FAILED, after {s['reconnects']} "
                  f"reconnects in all, for {s['kills']} kills of every camera and "
                  f"{s['freezes']} freezes of three. The largest lag behind the wall clock, "
                  f"just before each fault: median {s['lag_median']:.2f} s, at most "
                  f"{s['lag_max']:.2f} s."]
    if "reconnects" in results:
        c = results["reconnects"]
        lines += ["", "## Reconnects", "",
                  f"{c['cameras']} cameras killed for 3 s and back for 7 s, {c['cycles']} times "
                  f"({c['reconnects']} reconnects): resident memory {c['first']:.0f} MiB after "
                  f"the first cycle, {c['third']:.0f} after a third of them, {c['last']:.0f} "
                  f"after the last; slope over the last two thirds "
                  f"**{c['per_reconnect_kib']:.1f} KiB per reconnect**."]
    with open(args.output, "w") as out:
        out.write("\n".join(lines) + "\n")


def main():
    global PB, VC
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True)
    parser.add_argument("--repository", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--seconds", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--levels-320", default="32,48,64,80")
    parser.add_argument("--levels-640", default="8,16,24")
    parser.add_argument("--models", default="demo,demo-causal")
    parser.add_argument("--restart-cameras", type=int, default=24)
    parser.add_argument("--soak-minutes", type=float, default=120)
    parser.add_argument("--soak-embed-stride", type=int, default=5,
                        help="embed every Nth frame in the soak (a machine that cannot keep up "
                             "with the cameras at 5 fps would measure its backlog)")
    parser.add_argument("--reconnect-cycles", type=int, default=30)
    parser.add_argument("--parts", default="levels,restart,memory,soak",
                        help="which sections to run and write, comma-separated")
    parser.add_argument("--server-flag", action="append", default=[],
                        help="a flag for the server of each level, e.g. --server-flag=--precision=int8")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="cameras-bench-")
    PB, VC = generate_messages(work)
    parts = set(args.parts.split(","))
    results = {"levels": {}, "decode_limit": {}}
    for width, height, levels in ((320, 240, args.levels_320), (640, 360, args.levels_640)):
        if "levels" not in parts:
            make_clip(os.path.join(work, f"clip{width}.h264"), width, height)
            continue
        size = f"{width}x{height}"
        clip = os.path.join(work, f"clip{width}.h264")
        make_clip(clip, width, height)
        results["decode_limit"][size] = decode_limit(clip)
        print(f"decode-only limit at {size}: {results['decode_limit'][size]:.1f} cameras",
              flush=True)
        rows = results["levels"][size] = []
        for model in args.models.split(","):
            for count in (int(level) for level in levels.split(",") if level):
                rows.append(run_level(args, clip, count, model))
                print(rows[-1], flush=True)
                if not rows[-1]["kept_up"]:
                    break
    clip = os.path.join(work, "clip320.h264")
    model = args.models.split(",")[0]
    if "restart" in parts and args.restart_cameras > 0:
        results["restart"] = restart(args, clip, args.restart_cameras, model)
    if "memory" in parts and args.restart_cameras > 0:
        results["memory"] = memory(args, clip, args.restart_cameras, model)
    if "soak" in parts and args.soak_minutes > 0:
        results["soak"] = soak(args, clip, args.restart_cameras, model)
    if "reconnects" in parts:
        results["reconnects"] = reconnects(args, clip, 4, model)
    report(args, results)


if __name__ == "__main__":
    main()
