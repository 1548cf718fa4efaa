#!/usr/bin/env python3
"""What one stream's step of the 6-layer causal-linear head would cost with smaller weights.

A lone stream's step multiplies one frame by each of the head's weight matrices once, so it reads
every weight from memory once per frame. This times those matrix-vector products alone (the 24
linear layers of 6 transformer layers with d_model 512, FFN 1024, batch 1) with torch 1.13's CPU
kernels: float32 as the server runs them, bfloat16 weights, and int8 weights with dynamic
quantisation under both quantised engines the Debian build has (oneDNN and QNNPACK; no FBGEMM).
A last row runs one layer's float32 weights six times, so that they stay in the cache: the gap
to the first row is what reading the weights from memory costs. Prints a Markdown table of
medians for docs/streaming-benchmark.md.

Usage: weight_formats.py [--rounds 101] 2>/dev/null  (QNNPACK warns on every call, on stderr)
"""
import argparse
import os
import statistics
import time

import torch

D_MODEL = 512
FFN = 1024
LAYERS = 6
# Per transformer layer: the q/k/v projection, the output projection, the FFN's two layers.
SHAPES = [(D_MODEL, 3 * D_MODEL), (D_MODEL, D_MODEL), (D_MODEL, FFN), (FFN, D_MODEL)]


def linears(layers):
    torch.manual_seed(0)
    return torch.nn.ModuleList(
        [torch.nn.Linear(i, o) for _ in range(layers) for i, o in SHAPES]).eval()


def step_ms(modules, repeats, dtype, rounds):
    inputs = {n: torch.randn(1, n, dtype=dtype) for n in (D_MODEL, FFN)}

    def step():
        for _ in range(repeats):
            for module in modules:
                module(inputs[module.in_features])

    for _ in range(5):
        step()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def quantised(engine):
    torch.backends.quantized.engine = engine
    return torch.ao.quantization.quantize_dynamic(linears(LAYERS), {torch.nn.Linear},
                                                  dtype=torch.qint8)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=101)
    args = parser.parse_args()
    fp32 = linears(LAYERS)
    weights = sum(m.weight.numel() for m in fp32)
    rows = [
        ("float32 (the server's)", 4, lambda: (fp32, 1, torch.float32)),
        ("bfloat16 weights", 2, lambda: (linears(LAYERS).to(torch.bfloat16), 1, torch.bfloat16)),
        ("int8 weights, dynamic quantisation, oneDNN", 1,
         lambda: (quantised("onednn"), 1, torch.float32)),
        ("int8 weights, dynamic quantisation, QNNPACK", 1,
         lambda: (quantised("qnnpack"), 1, torch.float32)),
        ("float32, one layer's weights six times (in cache)", 4,
         lambda: (linears(1), LAYERS, torch.float32)),
    ]
    cores = len(os.sched_getaffinity(0))
    print(f"| weights | MiB read per step | 1 thread ms | {cores} threads ms |")
    print("|---|---|---|---|")
    with torch.inference_mode():
        for name, bytes_per_weight, make in rows:
            modules, repeats, dtype = make()
            mib = weights * bytes_per_weight / 2**20
            if repeats > 1:
                mib /= LAYERS
            cells = []
            for threads in (1, cores):
                torch.set_num_threads(threads)
                cells.append(f"{step_ms(modules, repeats, dtype, args.rounds):.2f}")
            print(f"| {name} | {mib:.1f} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
