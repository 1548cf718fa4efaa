#!/usr/bin/python3
"""Live feeds kept up with at stride 1 by backbone precision, side by side in one run.

For each level of feeds, a fresh vidclf-server in each precision (`--precision`) and number of
backbone batches side by side (`--backbone-batches-with-feeds`) takes N real-time 320x240 25 fps
feeds at once, as run_benchmark.py sends them, every frame embedded; a variant's higher levels are
skipped once one is not kept up with. Writes the section "Live feeds by backbone precision" of the
page at --output (or the section --section names), keeping the page's other sections.

Usage: precision_feeds.py --server BIN --client BIN --model-repository DIR
                          --output docs/streaming-benchmark.md [--precisions fp32,bf16]
                          [--batches-with-feeds 1,2] [--levels 8,12,16,24] [--seconds 20]
                          [--section "Live feeds by backbone precision"]
"""
import argparse
import os
import tempfile
import time

import run_benchmark

SECTION = "Live feeds by backbone precision"
# The instructions that decide the backbone's kernels, as /proc/cpuinfo names them.
INSTRUCTIONS = {"avx512f": "AVX-512", "avx512_bf16": "AVX-512 BF16", "avx512_vnni": "AVX-512 VNNI",
                "avx_vnni": "AVX-VNNI", "amx_bf16": "AMX"}


def cpu_instructions():
    """Which of INSTRUCTIONS the CPU has, or that it has none of them."""
    with open("/proc/cpuinfo") as cpuinfo:
        flags = next((line.split(":", 1)[1].split() for line in cpuinfo
                      if line.startswith("flags")), [])
    found = [name for flag, name in INSTRUCTIONS.items() if flag in flags]
    return ", ".join(found) if found else "no AVX-512, VNNI or AMX"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True)
    parser.add_argument("--client", required=True)
    parser.add_argument("--model-repository", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--batches-with-feeds", default="1,2")
    parser.add_argument("--levels", default="8,12,16,24")
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--section", default=SECTION)
    args = parser.parse_args()

    feed = os.path.join(tempfile.mkdtemp(prefix="vidclf-precision-feeds-"), "camera.mp4")
    run_benchmark.make_feed(feed, args.seconds)
    frames = 25 * args.seconds
    variants = [(precision, batches) for precision in args.precisions.split(",")
                for batches in args.batches_with_feeds.split(",")]
    began = time.strftime("%Y-%m-%d %H:%M")
    results = {variant: [] for variant in variants}
    for streams in [int(level) for level in args.levels.split(",")]:
        for precision, batches in variants:
            done = results[(precision, batches)]
            if done and not done[-1]["kept_up"]:
                continue  # the next levels would not keep up either
            server, grpc_port, metrics_port = run_benchmark.start_server(
                args.server, args.model_repository,
                ["--precision", precision, "--backbone-batches-with-feeds", batches])
            try:
                result = run_benchmark.run_level(args.client, grpc_port, metrics_port, feed,
                                                 streams, 1, frames)
            finally:
                run_benchmark.stop_server(server)
            done.append(result)
            print(precision, batches, result, flush=True)

    lines = [
        f"## {args.section}",
        "",
        f"Written by `bench/streaming/precision_feeds.py --levels {args.levels} --precisions "
        f"{args.precisions} --batches-with-feeds {args.batches_with_feeds}"
        + (f" --section \"{args.section}\"" if args.section != SECTION else "")
        + f"` on {began}, on this "
        f"machine's cores (`nproc`: {os.cpu_count()}, {run_benchmark.cpu_model()}: "
        f"{cpu_instructions()}), with the "
        "client processes on the same machine: the feeds and the kept-up rule of the table above, "
        "every frame embedded (stride 1), a fresh server for each variant and level, the variants "
        "taking turns level by level. `--backbone-batches-with-feeds 2` (the server's default "
        "where the models run on the CPU) embeds two batches side by side while feeds are open, "
        "each on one core; with 1, one batch at a time runs on both cores. The feeds' decoders "
        "and here the clients share those cores, and a batch on both waits at every layer for "
        "the thread whose core one of them took.",
        "",
        "| precision | batches side by side | feeds | kept up | feeds complete | p50 update ms |"
        " p99 update ms | first update ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (precision, batches), done in results.items():
        for r in done:
            lines.append(f"| {precision} | {batches} | {r['streams']} | "
                         f"{'yes' if r['kept_up'] else 'no'} | {r['complete']} of {r['streams']} | "
                         f"{r['p50']:.0f} | {r['p99']:.0f} | {r['first']:.0f} |")
    lines.append("")
    for (precision, batches), done in results.items():
        kept = [r["streams"] for r in done if r["kept_up"]]
        most = f"**{max(kept)}**" if kept else f"fewer than {done[0]['streams']}"
        lines.append(f"Most feeds kept up with in {precision}, `--backbone-batches-with-feeds "
                     f"{batches}`: {most}.")
        lines.append("")
    with open(args.output) as page:
        old = page.read().splitlines()
    new = [line for heading, body in run_benchmark.sections(old)
           if heading != lines[0] for line in body]
    while new and not new[-1]:
        new.pop()
    with open(args.output, "w") as page:
        page.write("\n".join(new + [""] + lines).rstrip("\n") + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
