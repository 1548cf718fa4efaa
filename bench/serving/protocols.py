#!/usr/bin/env python3
"""The front-door benchmark behind `make bench-protocols`: writes docs/protocol-benchmark.md.

One vidclf-server, loaded by `vidclf bench` over the serving benchmark's files (closed loop) at
each concurrency, once through vidclf.v1's Classify and once through the Open Inference
Protocol's ModelInfer (`--protocol v2`): the two protocols take turns within each round, their
order swapped from round to round, and the report gives clips/s as the median over the rounds,
p50 and p99 over every call of every round, and the ratio of v2 to vidclf. Then one 20 MB file, uploaded one call at a time by gRPC (Classify) and by HTTP
(POST /v2/models/NAME/classify), taking turns. Every number in the report comes from the run
itself.

Usage (what `make bench-protocols` runs):
  python3 bench/serving/protocols.py --server-binary build/bin/vidclf-server \\
      --client-binary build/bin/vidclf --repository build/model-repository \\
      --output docs/protocol-benchmark.md --work-dir build/serving-bench
"""

import argparse
import datetime
import http.client
import os
import sys
import time

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_benchmark as serving  # noqa: E402

PROTOCOLS = ["vidclf", "v2"]
# The targets: throughput and p50/p99 of v2 within 3% of vidclf's; an HTTP upload of a
# 20 MB file at most 5% slower than gRPC's.
TARGET_RELATIVE = 0.03
TARGET_UPLOAD_SLOWER = 0.05


def make_upload_file(work_dir):
    """An H.264 file of about 20 MB: 8 s of noisy 1080p at 20 Mbit/s."""
    path = os.path.join(work_dir, "files", "noise-1920x1080-20mbps-8s.mp4")
    if not os.path.exists(path):
        serving.log("encoding the 20 MB upload")
        partial = path + ".part.mp4"
        serving.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                     "testsrc2=size=1920x1080:rate=25,noise=alls=40:allf=t", "-t", "8", "-c:v",
                     "libx264", "-b:v", "20M", "-maxrate", "20M", "-bufsize", "40M", "-pix_fmt",
                     "yuv420p", partial])
        os.replace(partial, path)
    return path


def varint(value):
    out = b""
    while value >= 0x80:
        out += bytes([(value & 0x7F) | 0x80])
        value >>= 7
    return out + bytes([value])


def measure_upload(server, model, path, calls):
    """Median seconds of one call with the file at `path`, by gRPC and by HTTP, taking turns."""
    with open(path, "rb") as f:
        video = f.read()
    # vidclf.v1.ClassifyRequest{video = 1, top_k = 3}, encoded by hand.
    request = b"\x0a" + varint(len(video)) + video + b"\x18" + varint(3)
    channel = grpc.insecure_channel(server.address,
                                    options=[("grpc.max_send_message_length", 1 << 30)])
    classify = channel.unary_unary("/vidclf.v1.VideoClassifier/Classify",
                                   request_serializer=lambda raw: raw,
                                   response_deserializer=lambda raw: raw)
    classify(request, timeout=120)  # the channel set up, untimed
    seconds = {"grpc": [], "http": []}
    for call in range(calls):
        for door in ("grpc", "http") if call % 2 == 0 else ("http", "grpc"):
            start = time.monotonic()
            if door == "grpc":
                classify(request, timeout=120)
            else:
                connection = http.client.HTTPConnection("127.0.0.1", server.http_port,
                                                        timeout=120)
                connection.request("POST", f"/v2/models/{model}/classify?top_k=3", body=video)
                response = connection.getresponse()
                response.read()
                connection.close()
                if response.status != 200:
                    raise RuntimeError(f"HTTP classify answered {response.status}")
            seconds[door].append(time.monotonic() - start)
    channel.close()
    return {door: serving.median(values) for door, values in seconds.items()}, len(video)


def measure(args, files, upload):
    server = serving.Server(args.server_binary, args.repository,
                            ["--http-port", "0"], "protocols")
    try:
        rounds = []
        for round_index in range(args.rounds):
            order = PROTOCOLS if round_index % 2 == 0 else PROTOCOLS[::-1]
            results = {}
            for protocol in order:
                serving.log(f"round {round_index + 1}/{args.rounds}: --protocol {protocol}")
                results[protocol] = serving.run_vidclf_bench(
                    args.client_binary, server, files, args.concurrency, args.requests,
                    ["--protocol", protocol, "--warmup", "2"])
            rounds.append(results)
        serving.log(f"uploading {os.path.basename(upload)} by gRPC and HTTP")
        model = sorted(os.listdir(args.repository))[0]  # the server's default
        uploads = measure_upload(server, model, upload, args.upload_calls)
    finally:
        server.stop()
    return rounds, uploads


def summarize(rounds, concurrency):
    """Per protocol and concurrency: the median over rounds of clips/s and errors, and p50 and
    p99 of every call of every round pooled (a round's p99 over its 60 calls is nearly its
    slowest call; pooled, it rests on the rounds' 1% slowest)."""
    # The percentile `vidclf bench` and the Python pipeline's benchmark compute.
    from python_reference import percentile  # noqa: PLC0415
    table = {}
    for protocol in PROTOCOLS:
        for index, level in enumerate(concurrency):
            levels = [r[protocol][index] for r in rounds]
            pooled = [ms for lv in levels for ms in lv["latencies_ms"]]
            table[(protocol, level)] = {
                "clips_per_s": serving.median([lv["clips_per_s"] for lv in levels]),
                "errors": serving.median([lv["errors"] for lv in levels]),
                "p50_ms": percentile(pooled, 50),
                "p99_ms": percentile(pooled, 99),
            }
    return table


def write_report(path, args, files, table, uploads, seconds):
    lines = ["# Front-door benchmark: vidclf.v1 against the Open Inference Protocol", "",
             "Written by `make bench-protocols` (bench/serving/protocols.py) on "
             f"{datetime.date.today().isoformat()}: one vidclf-server, loaded by `vidclf bench` "
             "through vidclf.v1's Classify and through the Open Inference Protocol's ModelInfer "
             "(`--protocol v2`, the video as a BYTES tensor in raw_input_contents, as tritonclient "
             "sends it), taking turns within each round: "
             f"{args.rounds} rounds of {args.requests} calls per concurrency, clips/s the median "
             f"over the rounds, p50 and p99 over all {args.rounds * args.requests} calls; the run "
             f"took {seconds / 60:.0f} minutes.", "",
             f"- CPU: {serving.cpu_model()}, {len(os.sched_getaffinity(0))} cores",
             f"- Files: {', '.join(os.path.basename(f) for f in files)} (sent round-robin)",
             "- Model: the default of the demo model repository (`make model-repository`)", "",
             "| concurrency | protocol | clips/s | p50 ms | p99 ms | errors |",
             "|---|---|---|---|---|---|"]
    for level in args.concurrency:
        for protocol in PROTOCOLS:
            row = table[(protocol, level)]
            lines.append(f"| {level} | {protocol} | {row['clips_per_s']:.2f} | "
                         f"{row['p50_ms']:.0f} | {row['p99_ms']:.0f} | {row['errors']:.0f} |")
    lines += ["", "v2 against vidclf (the target: within "
              f"{TARGET_RELATIVE:.0%} of each other):", "",
              "| concurrency | clips/s | p50 | p99 | within the target |", "|---|---|---|---|---|"]
    for level in args.concurrency:
        base, v2 = table[("vidclf", level)], table[("v2", level)]
        ratios = [v2[k] / base[k] for k in ("clips_per_s", "p50_ms", "p99_ms")]
        holds = all(abs(r - 1) <= TARGET_RELATIVE for r in ratios)
        lines.append(f"| {level} | {ratios[0]:.3f} | {ratios[1]:.3f} | {ratios[2]:.3f} | "
                     f"{'yes' if holds else 'no'} |")
    lines += ["", "A ratio above 1 is more clips/s, or a longer latency, through v2. p99 rests "
              f"on the slowest {args.rounds * args.requests // 100} calls of each protocol, and "
              "is the noisiest figure here.", ""]
    (times, size) = uploads
    slower = times["http"] / times["grpc"] - 1
    lines += ["## A 20 MB upload: HTTP against gRPC", "",
              f"One file of {size / 1e6:.1f} MB (`noise-1920x1080-20mbps-8s.mp4`, made by the run), "
              f"classified one call at a time, {args.upload_calls} calls each way taking turns "
              "(gRPC: Classify on a channel kept open; HTTP: POST /v2/models/NAME/classify on a "
              "new connection each call, as curl makes), median seconds from the first byte sent "
              "to the answer read:", "",
              "| door | seconds | against gRPC |", "|---|---|---|",
              f"| gRPC | {times['grpc']:.3f} | 1.000 |",
              f"| HTTP | {times['http']:.3f} | {times['http'] / times['grpc']:.3f} |", "",
              f"Target: HTTP at most {TARGET_UPLOAD_SLOWER:.0%} slower: "
              f"**{'holds' if slower <= TARGET_UPLOAD_SLOWER else 'does not hold'}** "
              f"({slower:+.1%}).", ""]
    with open(path, "w", encoding="utf-8") as report:
        report.write("\n".join(lines))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server-binary", required=True)
    parser.add_argument("--client-binary", required=True)
    parser.add_argument("--repository", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--concurrency", type=lambda s: [int(c) for c in s.split(",")],
                        default=[1, 8])
    parser.add_argument("--upload-calls", type=int, default=15)
    args = parser.parse_args()
    start = time.monotonic()
    files = serving.make_files(args.work_dir)
    upload = make_upload_file(args.work_dir)
    rounds, uploads = measure(args, files, upload)
    table = summarize(rounds, args.concurrency)
    write_report(args.output, args, files, table, uploads, time.monotonic() - start)
    serving.log(f"wrote {args.output}")


if __name__ == "__main__":
    main()
