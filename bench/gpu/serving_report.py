#!/usr/bin/env python3
"""Writes docs/gpu-serving-benchmark.md from the outputs of bench/gpu/serve.sh.

Usage: serving_report.py RUN_DIR... docs/gpu-serving-benchmark.md

Each RUN_DIR holds what serve.sh wrote on one machine (several serve.sh calls on the same machine
may share one); each becomes a section of its own, since figures compare only within a machine.
Every figure comes from those files; a notes.txt in a RUN_DIR is copied in at the end of its
section.
"""
import csv
import datetime
import glob
import json
import os
import re
import statistics
import sys

STAGES = ("wall_s", "decode_s", "preprocess_s", "embed_s", "head_s")


def read(directory, name):
    path = os.path.join(directory, name)
    if not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8") as file:
        return file.read()


def json_lines(text):
    return [json.loads(line) for line in text.splitlines() if line.startswith("{\"")]


def variants(directory, prefix):
    """The variant names of the result files `prefix`-VARIANT.txt, fp16 and NVDEC first."""
    names = set()
    for path in glob.glob(os.path.join(directory, prefix + "-*.txt")):
        name = os.path.basename(path)[len(prefix) + 1:-len(".txt")]
        if not re.search(r"-(server|metrics|live\d+-.+)$", name):
            names.add(name)
    return sorted(names, key=lambda name: ("nvdec" not in name, name))


def label(variant):
    """cuda-fp16-nvdec -> models cuda fp16, decoding on NVDEC; cuda-fp16-nvdec-fresh adds that
    no decoder is kept between calls, cuda-fp16-nvdec-hostconv that NVDEC's frames are converted
    on the host; each _NAME.VALUE the server flag --NAME VALUE."""
    base, *flags = variant.split("_")
    parts = base.split("-")
    decode = "NVDEC" if "nvdec" in parts else "CPU"
    fresh = ", a decoder set up per call" if "fresh" in parts else ""
    host = ", frames converted on the host" if "hostconv" in parts else ""
    given = "".join(f", `--{flag.replace('.', ' ', 1)}`" for flag in flags)
    return f"models {parts[0]} {parts[1]}, decoding on {decode}{fresh}{host}{given}"


def median(values):
    return statistics.median(values) if values else float("nan")


def decoders_section(directory):
    rates = {}
    for device in ("cpu", "cuda"):
        for line in json_lines(read(directory, f"decode-rate-{device}.txt")):
            rates[(os.path.basename(line["file"]), line["parallel"], device)] = line
    reused = json_lines(read(directory, "decode-reuse.txt"))
    compared = json_lines(read(directory, "decode-compare.txt"))
    if not rates and not reused and not compared:
        return []
    lines = []
    if rates:
        lines += rate_table(rates)
    if reused:
        lines += reuse_table(rates, reused, json_lines(read(directory, "decode-kept.txt")))
    if compared:
        lines += compare_table(compared)
    # Each table after the first begins with a blank line.
    return ["### The decoders alone (`vidclf-decode-rate`)", ""] + lines[lines[0] == "":] + [""]


def rate_table(rates):
    lines = [
        "Every frame of each file decoded and dropped, by N decoders side by side (each its own "
        "copy of the file), as `ffmpeg -f null` does: frames decoded per second by all of them "
        "together, one round. CPU: libavcodec's software decoders, libavcodec's choice of "
        "threads each; NVDEC: libavcodec's cuda hwaccel, frames left in GPU memory. A file "
        "NVDEC does not decode is decoded on the CPU in the NVDEC column (marked).",
        "",
    ]
    # Runs before the decoders' opening and closing were timed have no such column.
    timed = any("open_ms" in line for line in rates.values())
    lines += [
        "| file | decoders | CPU frames/s | NVDEC frames/s |" +
        (" NVDEC's first decoder: open, first frame, close (ms) |" if timed else ""),
        "|---|---|---|---|" + ("---|" if timed else ""),
    ]
    for file, parallel in sorted({(file, parallel) for file, parallel, _ in rates}):
        cells = []
        for device in ("cpu", "cuda"):
            line = rates.get((file, parallel, device))
            if line is None:
                cells.append("")
                continue
            fallback = " (on the CPU)" if device == "cuda" and line["frames_on_gpu"] == 0 else ""
            cells.append(f"{line['frames_per_second']:.0f}{fallback}")
        nvdec = rates.get((file, parallel, "cuda"), {})
        costs = (", ".join(f"{nvdec[key]:.0f}" for key in ("open_ms", "first_frame_ms", "close_ms"))
                 if "open_ms" in nvdec else "")
        lines.append(f"| `{file}` | {parallel} | {cells[0]} | {cells[1]} |" +
                     (f" {costs} |" if timed else ""))
    return lines


def reuse_table(rates, reused, kept):
    """Decoders kept open for four passes, flushed in between, and (where measured) kept set up
    as media::DecoderPool keeps them."""
    kept_by = {(os.path.basename(line["file"]), line["parallel"]): line for line in kept}
    lines = [
        "",
        "Each NVDEC decoder kept open for four passes over its file, rewound and flushed in "
        "between (`vidclf-decode-rate --passes 4`): frames decoded per second by all." +
        (" Kept set up: the same with `--keep_set_up`, the runs ended as the server's pooled "
         "decoders end them (one thread, no flush; `media/decoder_feed.h`)." if kept else ""),
        "",
        "| file | decoders | NVDEC frames/s, 4 passes each | one pass (above) |"
        " first decoder's first pass (opening included), later passes (ms) |" +
        (" kept set up: frames/s | kept set up: first pass, later passes (ms) |" if kept else ""),
        "|---|---|---|---|---|" + ("---|---|" if kept else ""),
    ]

    def passes(line):
        # Runs before passes were timed apart have no such figures.
        return (f"{line['first_pass_ms']:.0f}, {line['later_pass_ms']:.0f}"
                if "later_pass_ms" in line else "")

    for line in reused:
        file = os.path.basename(line["file"])
        once = rates.get((file, line["parallel"], "cuda"))
        single = "" if once is None else f"{once['frames_per_second']:.0f}"
        row = (f"| `{file}` | {line['parallel']} | {line['frames_per_second']:.0f} | "
               f"{single} | {passes(line)} |")
        if kept:
            other = kept_by.get((file, line["parallel"]))
            row += (f" {other['frames_per_second']:.0f} | {passes(other)} |" if other
                    else " | |")
        lines.append(row)
    return lines


def compare_table(compared):
    rounds = any("round" in line for line in compared)
    # Runs before NVDEC's pictures were converted on the GPU have no such columns.
    pictures = any("gpu_pictures" in line for line in compared)
    lines = [
        "",
        "NVDEC's clips against the CPU's (`vidclf-decode-compare`: 16 frames sampled, 224x224 "
        "crops, the same frames chosen; differences in 8-bit levels after conversion)" +
        (", the GPU's decoders taken from a pool: in round 1 each file decodes with a decoder "
         "kept from round 0's clips." if rounds else ":") +
        (" NVDEC's frames converted on the host by libswscale (max, mean), then handed over as "
         "NVDEC's pictures and converted on the GPU by tensors, as the server does (pictures "
         "so converted; max, mean)." if pictures else ""),
        "",
        "| file |" + (" round | decoder kept from an earlier clip |" if rounds else "") +
        " decoded on | why on the CPU | frames decoded on the GPU | max | mean |" +
        (" GPU pictures | GPU max | GPU mean |" if pictures else ""),
        "|---|" + ("---|---|" if rounds else "") + "---|---|---|---|---|" +
        ("---|---|---|" if pictures else ""),
    ]
    for line in compared:
        name = f"| `{os.path.basename(line['file'])}` |"
        if rounds:
            name += f" {line['round']} | {'yes' if line.get('reused_decoder') else 'no'} |"
        if "error" in line:
            lines.append(f"{name} error: {line['error']} | | | | |")
            continue
        row = (f"{name} {line['decoded_on']} | {line['gpu_fallback'] or '-'} | "
               f"{line['frames_decoded_on_gpu']} | {line['max_levels']:.2f} | "
               f"{line['mean_levels']:.3f} |")
        if pictures:
            levels = line.get("gpu_pictures_levels")
            row += (f" {line['gpu_pictures']} | {levels['max']:.2f} | {levels['mean']:.3f} |"
                    if levels else f" {line.get('gpu_pictures', '')} | | |")
        lines.append(row)
    return lines


def inprocess_section(directory, videos):
    names = variants(directory, "inprocess")
    if not names:
        return []
    lines = [
        "### One call at a time, in-process (`vidclf-e2e-bench`)",
        "",
        "Medians of seven calls per file, after two untimed rounds, in ms.",
        "",
        "| file | variant | decoded on | call | decode | preprocess | embed | head "
        "| top label, score |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for video in videos:
        for name in names:
            answers = json_lines(read(directory, f"inprocess-{name}.txt"))
            answers = [a for a in answers if "ready" not in a]
            timed = answers[2 * len(videos):][videos.index(video)::len(videos)]
            errors = [a["error"] for a in answers if "error" in a]
            if errors or not timed:
                lines.append(f"| `{os.path.basename(video)}` | {label(name)} | "
                             f"{'error: ' + errors[0] if errors else 'no result'} "
                             "| | | | | | |")
                continue
            cells = " | ".join(f"{median([a[key] for a in timed]) * 1000:.1f}" for key in STAGES)
            lines.append(f"| `{os.path.basename(video)}` | {label(name)} | "
                         f"{timed[-1].get('decoded_on', '')} | {cells} | "
                         f"{timed[-1]['top']}, {timed[-1]['score']:.4f} |")
    return lines + [""]


def gpu_samples(directory, name, window=None):
    """Median GPU and decoder utilisation (%) and the most GPU memory (MiB) nvidia-smi saw, over
    the samples within `window` (epoch seconds, the GPU machine's clock in UTC) when given."""
    path = os.path.join(directory, f"serving-{name}-gpu.csv")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as file:
        rows = [row for row in csv.reader(file) if len(row) == 4]
    if window:
        rows = [row for row in rows if window[0] <= sample_time(row) <= window[1]]
    if not rows:
        return None
    column = lambda i: [float(row[i]) for row in rows]  # noqa: E731
    return median(column(1)), median(column(2)), max(column(3)), len(rows)


def sample_time(row):
    """An nvidia-smi sample's time, in epoch seconds."""
    stamp = datetime.datetime.strptime(row[0].strip(), "%Y/%m/%d %H:%M:%S.%f")
    return stamp.replace(tzinfo=datetime.timezone.utc).timestamp()


def gpu_memory_before(directory, name, moment):
    """The GPU memory (MiB) of nvidia-smi's last sample before `moment`, or None."""
    path = os.path.join(directory, f"serving-{name}-gpu.csv")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as file:
        rows = [row for row in csv.reader(file) if len(row) == 4 and sample_time(row) < moment]
    return float(rows[-1][3]) if rows else None


def serving_section(directory):
    names = variants(directory, "serving")
    if not names:
        return []
    lines = [
        "### Over gRPC at rising concurrency (`vidclf bench`)",
        "",
        "One server per variant, loaded by `vidclf bench --warmup 8 --metrics-url ...` with "
        "max(16, 8 x concurrency) calls per level. CPU s per call: the server's "
        "`process_cpu_seconds_total` over the level, divided by its calls.",
        "",
        "| variant | concurrency | calls | errors | clips/s | p50 ms | p99 ms | CPU s per call "
        "| decoded on GPU | frames per batch | RSS MiB |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in names:
        text = read(directory, f"serving-{name}.txt")
        start = text.find("{\n")
        levels = json.loads(text[start:])["levels"] if start >= 0 else []
        if not levels:
            log = read(directory, f"serving-{name}-server.txt").strip().splitlines()
            lines.append(f"| {label(name)} | no result; the server's last line: "
                         f"`{log[-1].strip() if log else 'nothing'}` | | | | | | | | | |")
        for level in levels:
            def number(key, digits, scale=1.0):
                value = level.get(key)
                return "" if value is None else f"{value * scale:.{digits}f}"
            lines.append(
                f"| {label(name)} | {level['concurrency']} | {level['requests']} | "
                f"{level['errors']} | {level['clips_per_s']:.2f} | {level['p50_ms']:.0f} | "
                f"{level['p99_ms']:.0f} | {number('server_cpu_seconds_per_clip', 3)} | "
                f"{number('gpu_decoded_share', 0, 100)}% | {number('batch_frames_mean', 1)} | "
                f"{number('server_rss_bytes', 0, 2**-20)} |")
    sampled = [(name, gpu_samples(directory, name)) for name in names]
    sampled = [(name, samples) for name, samples in sampled if samples]
    if sampled:
        lines += ["", "nvidia-smi every 500 ms while each server was loaded (median utilisation; "
                  "the most memory used on the GPU by every process):", ""]
        for name, (gpu, decoder, memory, count) in sampled:
            lines.append(f"- {label(name)}: GPU {gpu:.0f}%, NVDEC {decoder:.0f}%, at most "
                         f"{memory:.0f} MiB ({count} samples)")
    return lines + [""]


def live_section(directory):
    feeds = {}
    for path in glob.glob(os.path.join(directory, "serving-*-live*-*.txt")):
        match = re.search(r"serving-(.+)-live(\d+)-\d+\.txt$", path)
        if not match:
            continue  # the server's metrics around the run
        feeds.setdefault((match.group(1), int(match.group(2))), []).append(path)
    if not feeds:
        return []
    lines = [
        "### Live feeds (`vidclf stream --realtime`)",
        "",
        "N clients at once, each sending the same file as a live feed no faster than it plays; "
        "every frame embedded and answered. Latency: from a frame's arrival to its prediction "
        "(the prediction's `latency_ms`), over every prediction of every feed; and the median "
        "over feeds of each feed's first and last prediction's: a server that keeps up holds "
        "its lag from first to last, one that falls behind adds to it.",
        "",
        "| variant | file | feeds | predictions / frames sent | dropped | latency p50 ms | p99 ms |"
        " first prediction ms | last prediction ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (name, count), paths in sorted(feeds.items()):
        video = read(directory, f"serving-{name}-live{count}-file.txt").strip()
        video = f"`{video}`" if video else ""
        predictions, latencies, dropped, sent = 0, [], 0, 0
        firsts, lasts = [], []
        for path in paths:
            with open(path, encoding="utf-8") as file:
                text = file.read()
            answers = json_lines(text)
            predictions += len(answers)
            latencies += [answer["latency_ms"] for answer in answers]
            if answers:
                firsts.append(answers[0]["latency_ms"])
                lasts.append(answers[-1]["latency_ms"])
            summary = re.search(r"(\d+) frames seen, (\d+) embedded; (\d+) dropped", text)
            if summary:
                sent += int(summary.group(1))
                dropped += int(summary.group(3))
        if not latencies:
            lines.append(f"| {label(name)} | {video} | {len(paths)} | no prediction | | | | | |")
            continue
        latencies.sort()
        p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
        lines.append(f"| {label(name)} | {video} | {len(paths)} | {predictions} / {sent} | "
                     f"{dropped} | "
                     f"{median(latencies):.0f} | {p99:.0f} | {median(firsts):.0f} | "
                     f"{median(lasts):.0f} |")
    notes = []
    for name, count in sorted(feeds):
        notes += live_run_lines(directory, name, count)
    return lines + [""] + (notes + [""] if notes else []) + live_decoders_lines(directory)


def metric_sums(text, name):
    """{labels: value} of every sample of metric `name` in a Prometheus text page."""
    return {match.group(1) or "": float(match.group(2))
            for match in re.finditer(rf"^{name}(\{{[^}}]*\}})? (\S+)$", text, re.M)}


def live_run_lines(directory, name, count):
    """Where one live run's frames spent their time (vidclf_stream_frame_stage_seconds, read
    before and after the run), and where the server's CPU time went (thread_cpu.py)."""
    prefix = f"serving-{name}-live{count}"
    before = read(directory, f"{prefix}-metrics-before.txt")
    after = read(directory, f"{prefix}-metrics-after.txt")
    lines = []
    if after:
        sums = [metric_sums(text, "vidclf_stream_frame_stage_seconds_sum")
                for text in (before, after)]
        counts = [metric_sums(text, "vidclf_stream_frame_stage_seconds_count")
                  for text in (before, after)]
        means = []
        for stage in ("decode", "convert", "wait", "embed", "head"):
            key = f'{{stage="{stage}"}}'
            frames = counts[1].get(key, 0) - counts[0].get(key, 0)
            if frames > 0:
                seconds = sums[1].get(key, 0) - sums[0].get(key, 0)
                means.append(f"{stage} {1000 * seconds / frames:.1f}")
        if means:
            lines.append(f"- {label(name)}, {count} feeds: a live frame's mean ms by stage "
                         f"before its head's step (`vidclf_stream_frame_stage_seconds`): "
                         f"{', '.join(means)}.")
    samples = [json.loads(line) for line in
               read(directory, f"{prefix}-threads.jsonl").splitlines() if line.strip()]
    if len(samples) >= 2:
        first, last = samples[0], samples[-1]
        seconds = last["t"] - first["t"]
        hertz = first["ticks_per_s"]
        # A thread's ticks over the run: its last sample's less the first sample's (0 for a
        # thread begun during the run).
        latest = {}
        for sample in samples:
            latest.update(sample["threads"])
        by_name = {}
        for tid, (thread, ticks) in latest.items():
            begun = first["threads"].get(tid, [thread, 0])[1]
            cpu, threads = by_name.get(thread, (0, 0))
            by_name[thread] = (cpu + (ticks - begun) / hertz, threads + 1)
        total = sum(cpu for cpu, _ in by_name.values())
        busiest = sorted(by_name.items(), key=lambda item: -item[1][0])[:6]
        machine = ((last["machine_busy"] - first["machine_busy"]) /
                   (last["machine_total"] - first["machine_total"]))
        threads = "; ".join(f"`{thread}` ({n} thread{'' if n == 1 else 's'}) {cpu / seconds:.2f}"
                            for thread, (cpu, n) in busiest)
        lines.append(f"- {label(name)}, {count} feeds: the server used {total / seconds:.1f} "
                     f"cores over the {seconds:.0f} s run (the machine, clients included, "
                     f"{100 * machine:.0f}% of its cores); by thread name, cores: {threads}.")
        gpu = gpu_samples(directory, name, (first["t"], last["t"]))
        if gpu:
            lines.append(f"- {label(name)}, {count} feeds: GPU {gpu[0]:.0f}%, NVDEC {gpu[1]:.0f}% "
                         f"(medians of {gpu[3]} nvidia-smi samples), at most {gpu[2]:.0f} MiB.")
            idle = gpu_memory_before(directory, name, first["t"])
            if idle is not None:
                lines.append(f"- {label(name)}, {count} feeds: the GPU's memory in use "
                             f"(nvidia-smi: NVDEC's surfaces and LibTorch's cache included) "
                             f"went from {idle:.0f} MiB before the run to at most {gpu[2]:.0f}, "
                             f"{(gpu[2] - idle) / count:.1f} MiB a feed.")
    during = read(directory, f"{prefix}-metrics-during.txt")
    if before and during:
        held = [metric_sums(text, "vidclf_device_memory_bytes") for text in (before, during)]
        for key, now in sorted(held[1].items()):
            device = re.search(r'device="([^"]*)",kind="allocated"', key)
            if device:
                grown = (now - held[0].get(key, 0)) / 2**20
                lines.append(f"- {label(name)}, {count} feeds: LibTorch's tensors on "
                             f"{device.group(1)} held {grown:.0f} MiB more with the feeds open "
                             f"than before them, {grown / count:.2f} MiB a feed (the frames "
                             "between decoder and head, and the heads' states).")
    return lines


def live_decoders_lines(directory):
    """The live feeds' file decoded by as many decoders side by side as feeds, alone."""
    rates = json_lines(read(directory, "live-decode-rate.txt"))
    if not rates:
        return []
    lines = ["The live feeds' file decoded alone by as many decoders side by side as there "
             "were feeds, each twice (`vidclf-decode-rate --passes 2 --keep_set_up`): frames/s "
             "over both passes with the decoders' opening, and in the second pass (the first "
             "decoder's, times the decoders), the decoders' own ceiling for those feeds:", ""]
    for rate in rates:
        second = (rate["parallel"] * rate["frames_per_decoder"] / 2 /
                  (rate["later_pass_ms"] / 1000)) if rate.get("later_pass_ms") else float("nan")
        lines.append(f"- {rate['parallel']} decoders on {rate['decode_device']} of "
                     f"`{os.path.basename(rate['file'])}`: "
                     f"{rate['frames_per_second']:.0f} frames/s with opening, {second:.0f} in the "
                     f"second pass; the first decoder's first frame came {rate['first_frame_ms']:.0f} ms "
                     "after its opening, the decoders all set up at once.")
    return lines + [""]


def conversion_section(directory):
    rates = json_lines(read(directory, "yuv-conversion.txt"))
    if not rates:
        return []
    lines = [
        "### Pictures to the model's input (`vidclf-yuv-conversion-rate`)",
        "",
        "One 8-bit BT.709 picture at a time, resized and cropped to 112x112 (shorter side 128) "
        "and normalised: libswscale through `media::FrameConverter` on one host core, and "
        "`pipeline::ConvertYuv420`'s tensor operations on the CPU (LibTorch's threads) and on the "
        "GPU. Pictures per second, median of 9 rounds of 64; the largest difference of the "
        "GPU's normalised values from the CPU's.",
        "",
        "| size | libswscale, CPU | tensors, CPU | tensors, GPU | GPU against CPU |",
        "|---|---|---|---|---|",
    ]
    sizes = sorted({line["size"] for line in rates}, key=lambda size: int(size.split("x")[0]))
    for size in sizes:
        of_size = {(line["converter"], line["device"].split(":")[0]): line for line in rates
                   if line["size"] == size}
        cells = [f"{of_size[key]['pictures_per_second']:.0f}" if key in of_size else ""
                 for key in (("swscale", "cpu"), ("tensors", "cpu"), ("tensors", "cuda"))]
        gpu = of_size.get(("tensors", "cuda"))
        difference = f"{gpu['largest_difference_from_cpu']:.1e}" if gpu else ""
        lines.append(f"| {size} | {' | '.join(cells)} | {difference} |")
    return lines + [""]


def main():
    *directories, output = sys.argv[1:]
    lines = [
        "# GPU serving benchmark: vidclf's server and engine on one NVIDIA GPU",
        "",
        f"Written by `bench/gpu/serving_report.py` on {datetime.date.today().isoformat()} from "
        "the outputs of `bench/gpu/serve.sh`, which unpacks the Debian libraries that "
        "`bench/gpu/pack-deps.sh` packed, builds vidclf's server, client and benchmarks "
        "against the LibTorch inside the machine's PyTorch, and measures them there. Each "
        "section below is one machine: compare figures within a section only.",
        "",
        "The run: on a Debian machine with vidclf's dependencies, `bench/gpu/pack-deps.sh "
        "DEPS.tar.xz`, and the demo repository's `NAME/1/model.json` files copied into "
        "CONFIGS_DIR; on the GPU machine, from the repository's root, `bench/gpu/serve.sh "
        "DEPS.tar.xz CONFIGS_DIR OUTPUT_DIR VIDEO...` with the variants each section names. "
        "Regenerate with `python3 bench/gpu/serving_report.py OUTPUT_DIR... "
        "docs/gpu-serving-benchmark.md`.",
        "",
        "Models: the demo repository's three configurations (ResNet18 at 112x112, 16 frames; "
        "GRU, softmax-transformer and causal-linear heads) with seeded random weights "
        "(`vidclf-seeded-repository`): the same computation as the demo models, predictions "
        "that mean nothing. The default model (`demo`, GRU head) answers every call.",
        "",
    ]
    for number, directory in enumerate(directories, 1):
        videos = [line.split()[0] for line in read(directory, "videos.txt").splitlines()
                  if line.strip()]
        lines += [f"## Machine {number}", ""]
        lines += [f"- {line}" for line in read(directory, "machine.txt").strip().splitlines()]
        if videos:
            lines.append("- Files: " + ", ".join(f"`{os.path.basename(v)}`" for v in videos) + ".")
        lines.append("")
        lines += decoders_section(directory)
        lines += conversion_section(directory)
        lines += inprocess_section(directory, videos)
        lines += serving_section(directory)
        lines += live_section(directory)
        notes = read(directory, "notes.txt").strip()
        if notes:
            lines += ["### Notes on this machine's run", "", notes, ""]
    with open(output, "w", encoding="utf-8") as file:
        file.write("\n".join(lines).rstrip("\n") + "\n")


if __name__ == "__main__":
    main()
