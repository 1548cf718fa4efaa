#!/usr/bin/env python3
"""How many live streams' head steps one vidclf-server shares under real-time load.

Starts the server on REPOSITORY (whose default model should have a large recurrent head, such as a
6-layer causal-linear transformer), sends 1, then 4, 8 and 16 real-time feeds at once (a 20 s
320x240 25 fps H.264 file each, every 4th frame embedded) and prints a Markdown table: the
streams' steps, the passes over the head's weights that made them (from
vidclf_stream_head_step_streams) and the update latency, for docs/streaming-benchmark.md.

Usage: shared_steps.py --server BIN --client BIN --model-repository DIR [--levels 1,4,8,16]
                       [--server-arg=--flag=value ...]
"""
import argparse
import os
import tempfile

from run_benchmark import make_feed, metric, run_level, start_server, stop_server

SECONDS = 20
STRIDE = 4


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True)
    parser.add_argument("--client", required=True)
    parser.add_argument("--model-repository", required=True)
    parser.add_argument("--levels", default="1,4,8,16")
    parser.add_argument("--server-arg", action="append", default=[],
                        help="Passed on to the server; repeat for several.")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as work:
        feed = os.path.join(work, "camera.mp4")
        make_feed(feed, SECONDS)
        frames = 25 * SECONDS
        server, grpc_port, metrics_port = start_server(args.server, args.model_repository,
                                                     args.server_arg)
        try:
            run_level(args.client, grpc_port, metrics_port, feed, 1, STRIDE, frames)  # warm-up
            print("| feeds | stream steps | passes over the head | streams per pass | "
                  "p50 update ms | p99 update ms | kept up |")
            print("|---|---|---|---|---|---|---|")
            for feeds in (int(level) for level in args.levels.split(",")):
                before = (metric(metrics_port, "vidclf_stream_head_step_streams_sum"),
                          metric(metrics_port, "vidclf_stream_head_step_streams_count"))
                level = run_level(args.client, grpc_port, metrics_port, feed, feeds, STRIDE,
                                  frames)
                steps = metric(metrics_port, "vidclf_stream_head_step_streams_sum") - before[0]
                passes = metric(metrics_port, "vidclf_stream_head_step_streams_count") - before[1]
                print(f"| {feeds} | {steps:.0f} | {passes:.0f} | {steps / max(passes, 1):.1f} | "
                      f"{level['p50']:.0f} | {level['p99']:.0f} | "
                      f"{'yes' if level['kept_up'] else 'no'} |", flush=True)
        finally:
            stop_server(server)


if __name__ == "__main__":
    main()
