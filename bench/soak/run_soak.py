#!/usr/bin/env python3
"""The soak benchmark behind `make bench-soak`: writes docs/soak-benchmark.md.

One vidclf-server on loopback, under a mixed load for --minutes (30 by default):

* 4 clients calling back to back, each call picking a file and a way in turn: Classify with the
  bytes, ClassifyUpload in 64 KiB chunks, and every tenth call ListModels;
* 2 live streams (StreamClassify) fed an MPEG-TS camera feed at real time, each cancelled and
  opened again every 30 s;
* every 5 minutes, from 2.5 minutes in, a burst of 100 concurrent Classify calls of 10 MB each.

It reports errors (any status but OK, except the burst's RESOURCE_EXHAUSTED refusals and the
streams' own cancellations), the server's resident memory over time with its slope fitted after
the warm-up (MB per 10 minutes), the mixed calls' p50 and p99 in the first and last 5 minutes,
and how long the burst's refusals took. Every figure comes from the run itself.

Usage (what `make bench-soak` runs):
  python3 bench/soak/run_soak.py --server-binary build/bin/vidclf-server \\
      --repository build/model-repository --samples build/samples \\
      --output docs/soak-benchmark.md --work-dir build/soak

Needs Debian's python3-grpcio and python3-protobuf, protoc, ffmpeg. --minutes 3 makes a trial run
(one burst, at 1.5 minutes).
"""

import argparse
import datetime
import glob
import importlib.util
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

import grpc

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SERVICE = "/vidclf.v1.VideoClassifier/"

# Real files encoded here, besides the repository's samples: (name, ffmpeg arguments).
FILES = [
    ("h264-1280x720.mp4", "-f lavfi -i testsrc2=size=1280x720:rate=25 -t 8 -c:v libx264 -g 50"),
    ("hevc-960x540.mkv",
     "-f lavfi -i mandelbrot=size=960x540:rate=25 -t 6 -c:v libx265 -x265-params log-level=error"),
    ("vp9-640x360.webm", "-f lavfi -i testsrc=size=640x360:rate=25 -t 6 -c:v libvpx-vp9 -deadline realtime -cpu-used 8"),
]
# The burst's 10 MB: a keyframe a second, so that a sampled decode seeks rather than decodes it all.
BURST_FILE = ("burst-10mb.mp4",
              "-f lavfi -i testsrc2=size=1280x720:rate=25 -t 20 -c:v libx264 -g 25 -b:v 4M "
              "-maxrate 4M -bufsize 8M")
FEED_FILE = ("feed-320x240.ts",
             "-f lavfi -i testsrc2=size=320x240:rate=25 -t 40 -c:v libx264 -g 25 -bf 0 -f mpegts")

WARM_UP_S = 300  # the RSS slope is fitted after this


def generate_messages(out_dir):
    subprocess.run(["protoc", f"--proto_path={os.path.join(ROOT, 'proto')}",
                    f"--python_out={out_dir}", "vidclf/v1/video_classifier.proto"], check=True)
    spec = importlib.util.spec_from_file_location(
        "video_classifier_pb2", os.path.join(out_dir, "vidclf/v1/video_classifier_pb2.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_file(work, name, arguments):
    path = os.path.join(work, name)
    if not os.path.exists(path):
        subprocess.run(["ffmpeg", "-y", "-loglevel", "error", *arguments.split(), path], check=True)
    with open(path, "rb") as f:
        return f.read()


def resident_bytes(pid):
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def percentile(values, q):
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def slope_per_10_minutes(points):
    """Least-squares slope of (seconds, bytes), in MB per 10 minutes."""
    if len(points) < 2:
        return float("nan")
    mean_t = statistics.fmean(t for t, _ in points)
    mean_r = statistics.fmean(r for _, r in points)
    numerator = sum((t - mean_t) * (r - mean_r) for t, r in points)
    denominator = sum((t - mean_t) ** 2 for t, _ in points)
    return numerator / denominator * 600 / 1e6


class Soak:
    def __init__(self, args, pb, channel, channel_target, files, burst_video, feed, server_pid):
        self.args, self.pb, self.channel = args, pb, channel
        self.files, self.burst_video, self.feed = files, burst_video, feed
        self.server_pid = server_pid
        self.start = time.monotonic()
        self.end = self.start + args.minutes * 60
        self.lock = threading.Lock()
        self.calls = []  # (start offset s, seconds, method, code)
        self.errors = []  # (offset s, what)
        self.bursts = []  # per burst: [(code, seconds)]
        self.stream_restarts = 0
        self.stream_predictions = 0
        self.memory = []  # (offset s, bytes)
        self.classify = channel.unary_unary(
            SERVICE + "Classify", request_serializer=pb.ClassifyRequest.SerializeToString,
            response_deserializer=pb.ClassifyResponse.FromString)
        self.upload = channel.stream_unary(
            SERVICE + "ClassifyUpload",
            request_serializer=pb.ClassifyUploadRequest.SerializeToString,
            response_deserializer=pb.ClassifyResponse.FromString)
        self.list_models = channel.unary_unary(
            SERVICE + "ListModels", request_serializer=pb.ListModelsRequest.SerializeToString,
            response_deserializer=pb.ListModelsResponse.FromString)
        # The burst: 100 calls over 10 connections of their own, the request serialized once
        # (so that the client's own work does not count in the refusals' time).
        self.burst_request = pb.ClassifyRequest(video=burst_video).SerializeToString()
        self.burst_channels = [grpc.insecure_channel(channel_target, options=[
            ("grpc.max_send_message_length", 64 << 20), ("grpc.use_local_subchannel_pool", 1)])
            for _ in range(10)]
        self.burst_calls = [c.unary_unary(SERVICE + "Classify",
                                          request_serializer=lambda raw: raw,
                                          response_deserializer=pb.ClassifyResponse.FromString)
                            for c in self.burst_channels]
        self.stream = channel.stream_stream(
            SERVICE + "StreamClassify",
            request_serializer=pb.StreamClassifyRequest.SerializeToString,
            response_deserializer=pb.StreamPrediction.FromString)

    def now(self):
        return time.monotonic() - self.start

    def record_error(self, what):
        with self.lock:
            self.errors.append((self.now(), what))

    def client(self, index):
        models = [m.name for m in self.list_models(self.pb.ListModelsRequest(), timeout=30).models]
        call = 0
        while time.monotonic() < self.end:
            name, video = self.files[(index + call) % len(self.files)]
            model = models[(index + call) % len(models)]
            started = time.monotonic()
            method = ["Classify", "ClassifyUpload"][call % 2] if call % 10 != 9 else "ListModels"
            code = "OK"
            try:
                if method == "Classify":
                    self.classify(self.pb.ClassifyRequest(video=video, model=model), timeout=120)
                elif method == "ClassifyUpload":
                    settings = self.pb.ClassifyRequest(model=model)
                    chunks = [self.pb.ClassifyUploadRequest(settings=settings)] + [
                        self.pb.ClassifyUploadRequest(chunk=video[i:i + 65536])
                        for i in range(0, len(video), 65536)]
                    self.upload(iter(chunks), timeout=120)
                else:
                    self.list_models(self.pb.ListModelsRequest(), timeout=30)
            except grpc.RpcError as error:
                code = error.code().name
                # A server at its bound refuses at once; a client backs off and tries again.
                if code != "RESOURCE_EXHAUSTED":
                    self.record_error(f"{method} {name} ({model}): {code}: {error.details()}")
            with self.lock:
                self.calls.append((started - self.start, time.monotonic() - started, method, code))
            if code == "RESOURCE_EXHAUSTED":
                time.sleep(0.1)
            call += 1

    def feed_stream(self, index):
        chunk_bytes = 188 * 64
        bytes_per_second = len(self.feed) / 40  # the feed is 40 s long
        while time.monotonic() < self.end:
            opened = time.monotonic()
            stop = min(self.end, opened + 30)

            def requests():
                yield self.pb.StreamClassifyRequest(config=self.pb.StreamConfig(
                    input=self.pb.StreamConfig.CONTAINER, emit_every_frames=25))
                for offset in range(0, len(self.feed), chunk_bytes):
                    due = opened + offset / bytes_per_second
                    while time.monotonic() < due:
                        time.sleep(max(0.0, min(0.05, due - time.monotonic())))
                    if time.monotonic() >= stop:
                        return
                    yield self.pb.StreamClassifyRequest(chunk=self.feed[offset:offset + chunk_bytes])

            responses = self.stream(requests(), timeout=120)
            try:
                for _ in responses:
                    with self.lock:
                        self.stream_predictions += 1
                    if time.monotonic() >= stop:
                        responses.cancel()
            except grpc.RpcError as error:
                if error.code() != grpc.StatusCode.CANCELLED:
                    self.record_error(f"stream {index}: {error.code().name}: {error.details()}")
            with self.lock:
                self.stream_restarts += 1

    def burst(self):
        results = []

        def one(classify):
            started = time.monotonic()
            try:
                classify(self.burst_request, timeout=300)
                code = "OK"
            except grpc.RpcError as error:
                code = error.code().name
                if code != "RESOURCE_EXHAUSTED":
                    self.record_error(f"burst Classify: {code}: {error.details()}")
            with self.lock:
                results.append((code, time.monotonic() - started))

        threads = [threading.Thread(target=one, args=(self.burst_calls[i % len(self.burst_calls)],))
                   for i in range(100)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        with self.lock:
            self.bursts.append((self.now(), results))

    def bursts_on_schedule(self):
        first = 90 if self.args.minutes < 5 else 150
        due = self.start + first
        while due < self.end:
            while time.monotonic() < due:
                time.sleep(1)
            self.burst()
            due += 300

    def sample_memory(self):
        while time.monotonic() < self.end:
            with self.lock:
                self.memory.append((self.now(), resident_bytes(self.server_pid)))
            time.sleep(5)

    def run(self):
        threads = [threading.Thread(target=self.client, args=(i,)) for i in range(4)]
        threads += [threading.Thread(target=self.feed_stream, args=(i,)) for i in range(2)]
        threads += [threading.Thread(target=self.bursts_on_schedule),
                    threading.Thread(target=self.sample_memory)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()


def report(soak, args, started_at, took_s):
    minutes = args.minutes
    window = min(300, minutes * 60 / 3)
    mixed = [(t, s) for t, s, method, code in soak.calls if method != "ListModels" and code == "OK"]
    first = [s for t, s in mixed if t < window]
    last = [s for t, s in mixed if minutes * 60 - window <= t]
    after_warm_up = [(t, r) for t, r in soak.memory if t >= min(WARM_UP_S, minutes * 60 / 3)]
    slope = slope_per_10_minutes(after_warm_up)
    refusals = [s for _, results in soak.bursts for code, s in results if code == "RESOURCE_EXHAUSTED"]
    median_refusal_ms = 1e3 * statistics.median(refusals) if refusals else float("nan")
    p99_ratio = percentile(last, 99) / percentile(first, 99) if first and last else float("nan")
    cpu = re.search(r"model name\s*:\s*(.*)", open("/proc/cpuinfo").read()).group(1)
    lines = [
        "# Soak benchmark: a mixed load on one server for half an hour",
        "",
        f"Written by `make bench-soak` (`bench/soak/run_soak.py`), {started_at:%Y-%m-%d}, on "
        f"{os.cpu_count()} cores of an {cpu} ({platform.machine()}), {minutes} minutes "
        f"(the run took {took_s / 60:.1f}). Every figure below comes from this run. Command: "
        f"`{' '.join(['python3', 'bench/soak/run_soak.py'] + sys.argv[1:])}`.",
        "",
        "**Load.** 4 clients calling back to back (Classify with the bytes and ClassifyUpload in "
        f"64 KiB chunks, in turn, and ListModels every tenth call) over {len(soak.files)} files "
        "(the repository's samples and H.264, HEVC and VP9 files encoded here) and the "
        "repository's models in turn; 2 live streams (StreamClassify) fed a 320x240 MPEG-TS "
        "camera feed at real time, each cancelled and opened again every 30 s; every 5 minutes "
        "(from 2.5 minutes in) a burst of 100 concurrent 10 MB Classify calls. The server runs "
        "with its defaults.",
        "",
        "## Targets",
        "",
        "| target | figure | holds |",
        "|---|---|---|",
        f"| 0 errors other than intended refusals | {len(soak.errors)} | "
        f"{'yes' if not soak.errors else 'no'} |",
        f"| RSS slope after warm-up under 5 MB per 10 minutes | {slope:+.2f} MB per 10 minutes | "
        f"{'yes' if slope < 5 else 'no'} |",
        f"| p99 in the last {window / 60:.0f} minutes within 1.2x of the first | "
        f"{percentile(last, 99):.2f} s against {percentile(first, 99):.2f} s ({p99_ratio:.2f}x) | "
        f"{'yes' if p99_ratio <= 1.2 else 'no'} |",
        f"| the burst's refusals within 100 ms at the median | {median_refusal_ms:.1f} ms | "
        f"{'yes' if median_refusal_ms <= 100 else 'no'} |",
        "",
        "## Calls",
        "",
        f"{len(soak.calls)} mixed calls, {len(mixed)} of them Classify or ClassifyUpload answered, "
        f"{sum(1 for *_, code in soak.calls if code == 'RESOURCE_EXHAUSTED')} refused at once "
        "while a burst held the server at its bound (the client then waits 100 ms); "
        f"{soak.stream_predictions} stream predictions over {soak.stream_restarts} stream "
        "sessions.",
        "",
        "| window | calls | p50 (s) | p99 (s) |",
        "|---|---|---|---|",
        f"| first {window / 60:.0f} minutes | {len(first)} | {percentile(first, 50):.2f} | "
        f"{percentile(first, 99):.2f} |",
        f"| last {window / 60:.0f} minutes | {len(last)} | {percentile(last, 50):.2f} | "
        f"{percentile(last, 99):.2f} |",
        "",
        "## Bursts",
        "",
        "| at (min) | answered | refused | refusal median (ms) | refusal p90 (ms) | slowest answer (s) |",
        "|---|---|---|---|---|---|",
    ]
    for at, results in soak.bursts:
        refused = [s for code, s in results if code == "RESOURCE_EXHAUSTED"]
        answered = [s for code, s in results if code == "OK"]
        lines.append(
            f"| {at / 60:.1f} | {len(answered)} | {len(refused)} | "
            f"{1e3 * statistics.median(refused) if refused else float('nan'):.1f} | "
            f"{1e3 * percentile(refused, 90):.1f} | "
            f"{max(answered) if answered else float('nan'):.1f} |")
    lines += ["", "## Resident memory", "", "| minute | RSS (MB) |", "|---|---|"]
    for minute in range(0, minutes + 1, max(1, minutes // 10)):
        near = min(soak.memory, key=lambda point: abs(point[0] - minute * 60))
        lines.append(f"| {minute} | {near[1] / 1e6:.0f} |")
    lines += ["", f"Slope fitted by least squares over the {len(after_warm_up)} samples after "
              f"minute {min(WARM_UP_S, minutes * 60 / 3) / 60:.0f}.", ""]
    if soak.errors:
        lines += ["## Errors", ""] + [f"- {t / 60:.1f} min: {what}" for t, what in soak.errors[:50]]
        lines.append("")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server-binary", required=True)
    parser.add_argument("--repository", required=True)
    parser.add_argument("--samples", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--minutes", type=int, default=30)
    args = parser.parse_args()
    os.makedirs(args.work_dir, exist_ok=True)
    pb = generate_messages(args.work_dir)
    files = [(os.path.basename(p), open(p, "rb").read())
             for p in sorted(glob.glob(os.path.join(args.samples, "*")))]
    files += [(name, make_file(args.work_dir, name, arguments)) for name, arguments in FILES]
    burst_video = make_file(args.work_dir, *BURST_FILE)
    feed = make_file(args.work_dir, *FEED_FILE)

    server = subprocess.Popen(
        [args.server_binary, "--model-repository", args.repository, "--grpc-port", "0",
         "--metrics-port", "0"], stdout=subprocess.PIPE, text=True)
    output = ""
    while "gRPC listening" not in output:
        line = server.stdout.readline()
        if not line:
            sys.exit(f"the server did not start:\n{output}")
        output += line
    threading.Thread(target=lambda: [None for _ in server.stdout], daemon=True).start()
    port = int(re.search(r"gRPC listening on [\d.]+:(\d+)", output).group(1))
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=[
        ("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)])
    started_at = datetime.datetime.now()
    began = time.monotonic()
    soak = Soak(args, pb, channel, f"127.0.0.1:{port}", files, burst_video, feed, server.pid)
    soak.run()
    took = time.monotonic() - began
    channel.close()
    for burst_channel in soak.burst_channels:
        burst_channel.close()
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=60)
    text = report(soak, args, started_at, took)
    with open(args.output, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
