#!/usr/bin/env python3
"""Writes docs/gpu-serving-benchmark.md from the outputs of bench/gpu/serve.sh.

Usage: serving_report.py OUTPUT_DIR docs/gpu-serving-benchmark.md

Every figure comes from the files in OUTPUT_DIR, which bench/gpu/serve.sh wrote; a notes.txt
there, if any, is copied in under "Notes on this run".
"""
import datetime
import json
import os
import re
import statistics
import sys

INPROCESS = (("cuda fp16", "inprocess-cuda-fp16"), ("cuda fp32", "inprocess-cuda-fp32"),
             ("cpu fp32", "inprocess-cpu-fp32"))
SERVING = (("cuda fp16", "serving-cuda-fp16"), ("cpu fp32", "serving-cpu-fp32"))
STAGES = ("wall_s", "decode_s", "embed_s", "head_s")


def read(directory, name):
    path = os.path.join(directory, name + ".txt")
    if not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8") as file:
        return file.read()


def inprocess_calls(directory, name, videos):
    """{video: [answer, ...]} of the timed calls (the first two rounds over the files are not)."""
    answers = [json.loads(line) for line in read(directory, name).splitlines()
               if line.startswith("{") and "ready" not in line]
    calls = {video: [] for video in videos}
    for index, answer in enumerate(answers[2 * len(videos):]):
        calls[videos[index % len(videos)]].append(answer)
    return calls


def median_ms(answers, key):
    values = [answer[key] for answer in answers if key in answer]
    return statistics.median(values) * 1000 if values else float("nan")


def serving_levels(directory, name):
    text = read(directory, name)
    start = text.find("{")
    return json.loads(text[start:])["levels"] if start >= 0 else []


def device_memory_mib(directory, name):
    """{kind: MiB} of the server's device memory at the end of its run."""
    found = re.findall(r'^vidclf_device_memory_bytes\{[^}]*kind="(\w+)"[^}]*\} (\S+)$',
                       read(directory, name + "-metrics"), re.MULTILINE)
    return {kind: float(value) / 2**20 for kind, value in found}


def main():
    directory, output = sys.argv[1], sys.argv[2]
    videos = [line.split()[0] for line in read(directory, "videos").splitlines() if line.strip()]
    machine = read(directory, "machine").strip().splitlines()
    lines = [
        "# GPU serving benchmark: vidclf's server and engine on one NVIDIA GPU",
        "",
        f"Written by `bench/gpu/serving_report.py` on {datetime.date.today().isoformat()} from the "
        "outputs of `bench/gpu/serve.sh` (the notes at the end say which runs), which unpacks the Debian libraries that "
        "`bench/gpu/pack-deps.sh` packed (gRPC, Protobuf, Abseil, FFmpeg, prometheus-cpp and what "
        "they load), builds `vidclf-server`, `vidclf` and `vidclf-e2e-bench` against the LibTorch "
        "inside the machine's PyTorch, and runs them on the same files on `cuda:0` and on the "
        "machine's CPU. Regenerate with `python3 bench/gpu/serving_report.py OUTPUT_DIR "
        "docs/gpu-serving-benchmark.md`.",
        "",
        "The run: on a Debian machine with vidclf's dependencies, `bench/gpu/pack-deps.sh "
        "DEPS.tar.xz`, and the demo repository's `NAME/1/model.json` files copied into "
        "CONFIGS_DIR; on the GPU machine, from the repository's root, `bench/gpu/serve.sh "
        "DEPS.tar.xz CONFIGS_DIR OUTPUT_DIR VIDEO...`.",
        "",
    ]
    lines += [f"- {line}" for line in machine]
    lines += [
        "- Models: the demo repository's three configurations (ResNet18 at 112x112, 16 frames; "
        "GRU, softmax-transformer and causal-linear heads) with seeded random weights "
        "(`vidclf-seeded-repository`): the same computation as the demo models, predictions "
        "that mean nothing. The default model (`demo`, GRU head) answers every call.",
        "- Files: " + ", ".join(f"`{os.path.basename(video)}`" for video in videos) + ".",
        "- Decoding runs on the CPU in every variant (libavcodec, all the machine's cores); on "
        "the GPU variants the backbone and head run on `cuda:0`.",
        "",
        "## One call at a time, in-process (`vidclf-e2e-bench`)",
        "",
        "Medians of seven calls per file, after two untimed rounds, in ms.",
        "",
        "| file | variant | call | decode | embed | head | top label, score |",
        "|---|---|---|---|---|---|---|",
    ]
    calls = {label: inprocess_calls(directory, name, videos) for label, name in INPROCESS}
    for video in videos:
        for label, _ in INPROCESS:
            answers = calls[label][video]
            if not answers:
                lines.append(f"| `{os.path.basename(video)}` | {label} | no result | | | | |")
                continue
            errors = [answer["error"] for answer in answers if "error" in answer]
            if errors:
                lines.append(f"| `{os.path.basename(video)}` | {label} | error: {errors[0]} "
                             "| | | | |")
                continue
            cells = " | ".join(f"{median_ms(answers, key):.1f}" for key in STAGES)
            top = f"{answers[-1]['top']}, {answers[-1]['score']:.4f}"
            lines.append(f"| `{os.path.basename(video)}` | {label} | {cells} | {top} |")
    lines += [
        "",
        "## Over gRPC at rising concurrency (`vidclf bench`)",
        "",
        "One server per variant (`vidclf-server --device cuda:0 --precision fp16`, then "
        "`--device cpu`), loaded by `vidclf bench --concurrency 1,4,16,32 --warmup 8` over the "
        "files in turn.",
        "",
        "| variant | concurrency | calls | errors | clips/s | p50 ms | p95 ms | frames per batch "
        "| server RSS MiB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    throughput = {}
    for label, name in SERVING:
        levels = serving_levels(directory, name)
        if not levels:
            log = read(directory, name + "-server").strip().splitlines()
            lines.append(f"| {label} | no result: the server's last line was "
                         f"`{log[-1].strip() if log else 'nothing'}` | | | | | | | |")
        for level in levels:
            throughput[(label, level["concurrency"])] = level["clips_per_s"]
            rss = level.get("server_rss_bytes")
            batch = level.get("batch_frames_mean")
            lines.append(
                f"| {label} | {level['concurrency']} | {level['requests']} | {level['errors']} | "
                f"{level['clips_per_s']:.2f} | {level['p50_ms']:.0f} | {level['p95_ms']:.0f} | "
                f"{'' if batch is None else f'{batch:.1f}'} | "
                f"{'' if rss is None else f'{rss / 2**20:.0f}'} |")
    ratios = [f"{concurrency}: {throughput[('cuda fp16', concurrency)] / cpu:.2f}x"
              for (label, concurrency), cpu in sorted(throughput.items())
              if label == "cpu fp32" and ("cuda fp16", concurrency) in throughput and cpu > 0]
    if ratios:
        lines += ["", "Throughput on the GPU over the CPU's, by concurrency: " +
                  ", ".join(ratios) + "."]
    memory = device_memory_mib(directory, "serving-cuda-fp16")
    if memory:
        lines += ["", "GPU memory of the GPU server after its run (`vidclf_device_memory_bytes`): " +
                  ", ".join(f"{kind} {mib:.0f} MiB" for kind, mib in sorted(memory.items())) + "."]
    notes = read(directory, "notes").strip()
    if notes:
        lines += ["", "## Notes on this run", "", notes]
    with open(output, "w", encoding="utf-8") as file:
        file.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
