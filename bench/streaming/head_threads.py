#!/usr/bin/env python3
"""Real-time feeds against vidclf-server with different --head-intra-op-threads, side by side.

For each round and each thread count in turn, starts the server on REPOSITORY with that count,
sends one warm-up feed, then each level of real-time feeds at once (this page's 20 s 320x240
feed, every 4th frame embedded), and prints one line per level: the thread count, the feeds, the
p50 and p99 update latency and whether the level was kept up with. For
docs/streaming-benchmark.md.

Usage: head_threads.py --server BIN --client BIN --model-repository DIR [--threads 2,1]
                       [--levels 24] [--rounds 5]
"""
import argparse
import os
import tempfile

from run_benchmark import make_feed, run_level, start_server, stop_server

SECONDS = 20
STRIDE = 4


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True)
    parser.add_argument("--client", required=True)
    parser.add_argument("--model-repository", required=True)
    parser.add_argument("--threads", default="2,1")
    parser.add_argument("--levels", default="24")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as work:
        feed = os.path.join(work, "camera.mp4")
        make_feed(feed, SECONDS)
        frames = 25 * SECONDS
        print("| round | head intra-op threads | feeds | p50 update ms | p99 update ms | kept up |")
        print("|---|---|---|---|---|---|")
        for round_number in range(1, args.rounds + 1):
            for threads in args.threads.split(","):
                server, grpc_port, metrics_port = start_server(
                    args.server, args.model_repository, [f"--head-intra-op-threads={threads}"])
                try:
                    run_level(args.client, grpc_port, metrics_port, feed, 1, STRIDE, frames)
                    for feeds in (int(level) for level in args.levels.split(",")):
                        level = run_level(args.client, grpc_port, metrics_port, feed, feeds,
                                          STRIDE, frames)
                        print(f"| {round_number} | {threads} | {feeds} | {level['p50']:.0f} | "
                              f"{level['p99']:.0f} | {'yes' if level['kept_up'] else 'no'} |",
                              flush=True)
                finally:
                    stop_server(server)


if __name__ == "__main__":
    main()
