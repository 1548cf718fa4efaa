#!/usr/bin/env python3
"""The front-door benchmark behind `make bench-protocols`: writes docs/protocol-benchmark.md.

One vidclf-server, loaded by `vidclf bench` over the serving benchmark's files (closed loop) at
each concurrency, once through vidclf.v1's Classify and once through the Open Inference
Protocol's ModelInfer (`--protocol v2`): the two protocols take turns within each round, their
order swapped from round to round, and the report gives medians over the rounds and the ratio of
v2 to vidclf. Every number in the report comes from the run itself.

Usage (what `make bench-protocols` runs):
  python3 bench/serving/protocols.py --server-binary build/bin/vidclf-server \\
      --client-binary build/bin/vidclf --repository build/model-repository \\
      --output docs/protocol-benchmark.md --work-dir build/serving-bench
"""

import argparse
import datetime
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_benchmark as serving  # noqa: E402

PROTOCOLS = ["vidclf", "v2"]
# The target: throughput and p50/p99 of v2 within 3% of vidclf's.
TARGET_RELATIVE = 0.03


def measure(args, files):
    server = serving.Server(args.server_binary, args.repository, [], "protocols")
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
    finally:
        server.stop()
    return rounds


def summarize(rounds, concurrency):
    table = {}
    for protocol in PROTOCOLS:
        for index, level in enumerate(concurrency):
            levels = [r[protocol][index] for r in rounds]
            table[(protocol, level)] = {
                key: serving.median([lv[key] for lv in levels])
                for key in ("clips_per_s", "p50_ms", "p99_ms", "errors")
            }
    return table


def write_report(path, args, files, table, seconds):
    lines = ["# Front-door benchmark: vidclf.v1 against the Open Inference Protocol", "",
             "Written by `make bench-protocols` (bench/serving/protocols.py) on "
             f"{datetime.date.today().isoformat()}: one vidclf-server, loaded by `vidclf bench` "
             "through vidclf.v1's Classify and through the Open Inference Protocol's ModelInfer "
             "(`--protocol v2`, the video as a BYTES tensor in raw_input_contents, as tritonclient "
             "sends it), taking turns within each round. Medians over "
             f"{args.rounds} rounds of {args.requests} calls per concurrency; the run took "
             f"{seconds / 60:.0f} minutes.", "",
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
    lines += ["", "A ratio above 1 is more clips/s, or a longer latency, through v2. p99 over "
              f"{args.requests} calls is close to their largest, and the noisiest figure here.",
              ""]
    with open(path, "w", encoding="utf-8") as report:
        report.write("\n".join(lines))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server-binary", required=True)
    parser.add_argument("--client-binary", required=True)
    parser.add_argument("--repository", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--concurrency", type=lambda s: [int(c) for c in s.split(",")],
                        default=[1, 8])
    args = parser.parse_args()
    start = time.monotonic()
    files = serving.make_files(args.work_dir)
    table = summarize(measure(args, files), args.concurrency)
    write_report(args.output, args, files, table, time.monotonic() - start)
    serving.log(f"wrote {args.output}")


if __name__ == "__main__":
    main()
