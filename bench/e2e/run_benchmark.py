#!/usr/bin/env python3
"""The end-to-end benchmark behind `make bench-e2e`: writes docs/performance.md and its plot.

The latency of one clip at concurrency 1, per file, on real files: python3-imageio's samples and
generated 720p and 1080p H.264 and HEVC with short and long GOPs. In one run it measures, taking
turns within each round (the order rotates from round to round):

* vidclf in-process: the server's engine (decode stage, backbone batcher, head stage) with the
  server's defaults, driven by vidclf-e2e-bench, with no gRPC;
* vidclf over gRPC: vidclf-server on loopback, called by `vidclf bench` (one request per call of
  the client, its latency timed by the client from sending to the answer);
* both with exact decoding (the default) and with fast decoding (snap_to_keyframes and
  skip_loop_filter);
* bench/serving/python_reference.py, the careful Python pipeline (PyAV decoding with frame and
  slice threads, seeking to keyframes and skipping unwanted non-reference frames as the server
  does, torchvision ResNet18 in channels-last, the same GRU head), one worker of all the cores'
  threads, in a process of its own;
* the limits: the CPU time libavcodec (through PyAV, one thread, no conversion) takes to decode
  exactly the frames vidclf's decoder decodes for the sampling, spread over the cores, plus the
  backbone's FLOPs at the sgemm rate of all the cores measured in the same run; the same frames
  decoded by libavcodec's own frame threads (two per core, as the ffmpeg CLI and vidclf's single
  decoder run them), wall time, plus the same backbone time; and, as a cross-check, the ffmpeg
  CLI's wall time with all the cores decoding every frame and decoding keyframes only.

Then, for the accuracy cost of fast decoding, it classifies every test video of the training
benchmark (`vidclf-train synth`'s split 1), as made and re-encoded with a keyframe every 8
frames, with exact and fast decoding.

Usage (what `make bench-e2e` runs):
  python3 bench/e2e/run_benchmark.py --bin-dir build/bin --repository build/model-repository \\
      --synthetic-data build/model-training/data --output docs/performance.md \\
      --work-dir build/e2e-bench
"""

import argparse
import bisect
import datetime
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SERVING = os.path.join(os.path.dirname(HERE), "serving")
sys.path.insert(0, SERVING)


def _load_serving_benchmark():
    """bench/serving/run_benchmark.py, for its helpers (machine facts, limits, the server)."""
    spec = importlib.util.spec_from_file_location("serving_benchmark",
                                                  os.path.join(SERVING, "run_benchmark.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


serving = _load_serving_benchmark()
log = serving.log
median = serving.median

# Generated files: codec, encoder settings, width, height, GOP (frames). 10 s at 25 fps of a
# moving test pattern with temporal noise, so that frames cost what camera footage costs.
GENERATED = [
    ("h264", 1280, 720, 250),
    ("h264", 1280, 720, 25),
    ("h264", 1920, 1080, 250),
    ("h264", 1920, 1080, 25),
    ("hevc", 1280, 720, 250),
    ("hevc", 1920, 1080, 250),
    ("hevc", 1920, 1080, 25),
    ("vp9", 1280, 720, 25),
]
ENCODERS = {
    "h264": ["-c:v", "libx264", "-preset", "veryfast"],
    "hevc": ["-c:v", "libx265", "-preset", "ultrafast", "-tag:v", "hvc1"],
    "vp9": ["-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", "-row-mt", "1"],
}
# VP9 in WebM, so that a Matroska file is timed beside the MP4s.
CONTAINERS = {"h264": "mp4", "hevc": "mp4", "vp9": "webm"}
SECONDS = 10
FAST = ["snap-to-keyframes", "skip-loop-filter"]
# vidclf-e2e-bench's flags for each in-process variant: the server's defaults, then one lever each.
INPROCESS_FLAGS = {
    "inproc exact": [],
    "inproc overlap": ["--embed_while_decoding"],
    "inproc one decoder": ["--nosplit_at_keyframes"],
    "inproc unbound": ["--nobind_backbone_threads"],
    "inproc fused": ["--backbone_kernels", "fused"],
}
# The synthetic test split re-encoded with a keyframe this often, where snapping applies.
SHORT_GOP = 8

TARGET_LIMIT_RATIO = 1.2  # vidclf latency against the limit, every file, exact decoding
TARGET_PYTHON_RATIO = 0.75  # vidclf latency against Python's
# Frame threads per core of vidclf's decoder for a call decoding alone, and of the limit that
# decodes with libavcodec's threads.
FRAME_THREADS_PER_CORE = 2


def generated_name(codec, width, height, gop):
    return f"{codec}-{width}x{height}-gop{gop}.{CONTAINERS[codec]}"


def make_files(work_dir):
    directory = os.path.join(work_dir, "files")
    os.makedirs(directory, exist_ok=True)
    files = []
    cockatoo = serving.find_cockatoo()
    if cockatoo:
        files.append(cockatoo)
        realshort = os.path.join(os.path.dirname(cockatoo), "realshort.mp4")
        if os.path.exists(realshort):
            files.append(realshort)
    else:
        log("python3-imageio's sample videos not found; going on without them")
    for codec, width, height, gop in GENERATED:
        path = os.path.join(directory, generated_name(codec, width, height, gop))
        if not os.path.exists(path):
            log(f"encoding {os.path.basename(path)}")
            partial = f"{path}.part.{CONTAINERS[codec]}"
            params = {
                "h264": ["-x264-params", f"keyint={gop}:min-keyint={gop}:scenecut=0"],
                "hevc": ["-x265-params",
                         f"keyint={gop}:min-keyint={gop}:scenecut=0:log-level=error"],
                "vp9": ["-g", str(gop), "-keyint_min", str(gop), "-b:v", "3M" if height <= 720
                        else "6M"],
            }[codec]
            # Bit rates of typical camera footage: 3 Mbit/s at 720p, 6 at 1080p.
            rate = 3 if height <= 720 else 6
            serving.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                         f"testsrc2=size={width}x{height}:rate=25,noise=alls=6:allf=t",
                         "-t", str(SECONDS), *ENCODERS[codec], *params, "-maxrate", f"{rate}M",
                         "-bufsize", f"{2 * rate}M", "-pix_fmt", "yuv420p", partial])
            os.replace(partial, path)
        files.append(path)
    return files


# ---------------------------------------------------------------------------------------------
# The limits
# ---------------------------------------------------------------------------------------------


def snap_to_keyframes(uniform, total, keyframes):
    """media/frame_sampler.cc SnapToKeyframes."""
    n = len(uniform)
    if n == 0 or n >= total:
        return list(uniform)
    snapped = []
    for i, centre in enumerate(uniform):
        begin, end = i * total // n, (i + 1) * total // n
        after = bisect.bisect_left(keyframes, centre)
        best = None
        if after < len(keyframes) and keyframes[after] < end:
            best = keyframes[after]
        if after > 0 and keyframes[after - 1] >= begin and (
                best is None or centre - keyframes[after - 1] <= best - centre):
            best = keyframes[after - 1]
        snapped.append(centre if best is None else best)
    return snapped


def decode_plan(path, num_frames, fast, threads=1):
    """CPU seconds, wall seconds and frames decoded of libavcodec decoding, with `threads` frame
    threads and converting nothing, the frames vidclf's decoder decodes for uniform sampling
    (media/sampled_decode.cc): seeking to the keyframe before the next wanted frame when it lies
    past every packet sent, dropping the non-reference frames not wanted; `fast` also snaps the
    samples to keyframes and skips the loop filter."""
    import av  # noqa: PLC0415

    import python_reference as ref  # noqa: PLC0415

    with av.open(path) as container:
        stream = container.streams.video[0]
        pts, keys = [], []
        for packet in container.demux(stream):
            if packet.size > 0 and packet.pts is not None:
                pts.append(packet.pts)
                if packet.is_keyframe:
                    keys.append(packet.pts)
    ordered = sorted(pts)
    index_of = {p: i for i, p in enumerate(ordered)}
    keyframes = sorted(index_of[p] for p in keys)
    wanted = ref.uniform_sample_indices(len(ordered), num_frames)
    if fast:
        wanted = snap_to_keyframes(wanted, len(ordered), keyframes)

    start_cpu, start_wall = time.process_time(), time.perf_counter()
    decoded = 0
    with av.open(path) as container:
        stream = container.streams.video[0]
        stream.thread_type = "FRAME" if threads > 1 else "AUTO"
        stream.thread_count = threads
        context = stream.codec_context
        if fast:
            context.options = {"skip_loop_filter": "all"}
        next_wanted = 0
        highest_sent = -1
        packets = container.demux(stream)

        def take(frames):
            nonlocal decoded, next_wanted
            for frame in frames:
                decoded += 1
                if next_wanted < len(wanted) and index_of.get(frame.pts) == wanted[next_wanted]:
                    next_wanted += 1

        def keyframe_ahead(target):
            after = bisect.bisect_right(keyframes, target)
            if after > 0 and keyframes[after - 1] > highest_sent + 1:
                return keyframes[after - 1]
            return None

        def seek(keyframe):
            nonlocal highest_sent, packets
            container.seek(ordered[keyframe], stream=stream, backward=True)  # flushes the decoder
            highest_sent = keyframe - 1
            packets = container.demux(stream)

        while next_wanted < len(wanted):
            keyframe = keyframe_ahead(wanted[next_wanted])
            if keyframe is not None:
                seek(keyframe)
            packet = next(packets, None)
            if packet is None or packet.size == 0:
                take(context.decode(None))
                break
            index = index_of.get(packet.pts, -1)
            highest_sent = max(highest_sent, index)
            context.skip_frame = "DEFAULT" if index in wanted[next_wanted:] else "NONREF"
            take(context.decode(packet))
            if next_wanted < len(wanted) and index == wanted[next_wanted]:
                # As vidclf does: when no later packet is needed for this frame, end the input so
                # that the decoder hands it out now.
                last = next_wanted + 1 == len(wanted)
                keyframe = None if last else keyframe_ahead(wanted[next_wanted + 1])
                if last or keyframe is not None:
                    take(context.decode(None))
                    if keyframe is not None:
                        seek(keyframe)
    return {"cpu_s": time.process_time() - start_cpu, "wall_s": time.perf_counter() - start_wall,
            "frames": decoded}


def ffmpeg_wall(path, cores, keyframes_only):
    """Wall seconds of the ffmpeg CLI decoding `path` to nothing with `cores` threads, start-up
    included."""
    command = ["ffmpeg", "-nostdin", "-loglevel", "error", "-threads", str(cores)]
    if keyframes_only:
        command += ["-skip_frame", "nokey"]
    command += ["-i", path, "-map", "0:v:0", "-f", "null", "-"]
    start = time.perf_counter()
    serving.run(command)
    return time.perf_counter() - start


# ---------------------------------------------------------------------------------------------
# The pipelines
# ---------------------------------------------------------------------------------------------


class InProcess:
    """vidclf-e2e-bench: the engine in-process."""

    def __init__(self, binary, repository, cores, flags=()):
        # The library thread settings vidclf-server sets for itself (server/main.cc).
        env = dict(os.environ, OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
                   OPENBLAS_NUM_THREADS=os.environ.get("OPENBLAS_NUM_THREADS", "1"))
        self.process = subprocess.Popen(
            [binary, "--repository", repository, "--cores", str(cores), *flags],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1, env=env)
        ready = json.loads(self.process.stdout.readline() or "{}")
        if not ready.get("ready"):
            raise RuntimeError("vidclf-e2e-bench did not start")

    def classify(self, path, options=()):
        self.process.stdin.write(" ".join([path, *options]) + "\n")
        self.process.stdin.flush()
        answer = json.loads(self.process.stdout.readline())
        if "error" in answer:
            raise RuntimeError(f"vidclf-e2e-bench: {path}: {answer['error']}")
        return answer

    def stop(self):
        self.process.stdin.close()
        self.process.wait(60)


def grpc_latency(client, server, path, options=(), warm=True):
    """Seconds from sending one Classify call to its answer, timed by `vidclf bench`; `warm`:
    after one untimed call on the same channel (as a client that keeps its channel), else the
    first call on a new connection."""
    command = [client, "bench", path, "--server", server.address, "--concurrency", "1",
               "--warmup", "1" if warm else "0", "--requests", "1", "--json",
               *[f"--{option}" for option in options]]
    out = serving.run(command, capture_output=True, text=True).stdout
    level = json.loads(out)["levels"][0]
    if level.get("errors"):
        raise RuntimeError(f"vidclf bench: {path}: {level.get('first_error')}")
    return level["p50_ms"] / 1000


class PythonPipeline:
    """python_reference.Classifier in a process of its own, with all the cores' threads."""

    def __init__(self, bundle, cores, warm_file):
        import concurrent.futures  # noqa: PLC0415
        import multiprocessing  # noqa: PLC0415

        import python_reference as ref  # noqa: PLC0415

        os.environ["OMP_NUM_THREADS"] = str(cores)
        os.environ["OPENBLAS_NUM_THREADS"] = "1"  # as python_reference.py's bench
        self.ref = ref
        self.executor = concurrent.futures.ProcessPoolExecutor(
            max_workers=1, mp_context=multiprocessing.get_context("spawn"),
            initializer=ref._worker_init,
            initargs=(bundle, cores, cores, "swscale", True, True, warm_file, True))

    def classify(self, path):
        top, info = self.executor.submit(self.ref._worker_classify, path).result()
        return top, info

    def stop(self):
        self.executor.shutdown()


# ---------------------------------------------------------------------------------------------
# Accuracy of fast decoding
# ---------------------------------------------------------------------------------------------


def reencode_short_gop(videos, directory):
    """The test videos re-encoded as H.264 with a keyframe every SHORT_GOP frames."""
    out = []
    for path in videos:
        target = os.path.join(directory, os.path.basename(os.path.dirname(path)),
                              os.path.splitext(os.path.basename(path))[0] + ".mp4")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.exists(target):
            serving.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-i", path, "-c:v",
                         "libx264", "-preset", "veryfast", "-x264-params",
                         f"keyint={SHORT_GOP}:min-keyint={SHORT_GOP}:scenecut=0", "-pix_fmt",
                         "yuv420p", target])
        out.append(target)
    return out


def accuracy(engine, videos, labels, options):
    tops = [engine.classify(path, options)["top"] for path in videos]
    correct = sum(1 for top, label in zip(tops, labels) if top == label)
    return correct / len(videos), tops


def measure_accuracy(engine, data_dir, work_dir):
    split = os.path.join(data_dir, "splits", "testlist01.txt")
    with open(split, encoding="utf-8") as f:
        relative = [line.split()[0] for line in f if line.strip()]
    videos = [os.path.join(data_dir, "videos", r) for r in relative]
    labels = [r.split("/")[0] for r in relative]
    log(f"accuracy of fast decoding on {len(videos)} test videos")
    sets = {"as made": videos,
            f"H.264, keyframe every {SHORT_GOP} frames":
                reencode_short_gop(videos, os.path.join(work_dir, "short-gop"))}
    variants = {"exact": [], "snap to keyframes": ["snap-to-keyframes"],
                "skip loop filter": ["skip-loop-filter"], "both": FAST}
    results = {}
    for name, paths in sets.items():
        exact_tops = None
        for variant, options in variants.items():
            acc, tops = accuracy(engine, paths, labels, options)
            if exact_tops is None:
                exact_tops = tops
            agree = sum(1 for a, b in zip(tops, exact_tops) if a == b) / len(tops)
            results.setdefault(name, {})[variant] = {"accuracy": acc, "agreement": agree}
    return {"videos": len(videos), "sets": results}


# ---------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------


def measure(args, files, infos, bundle, config):
    cores = len(os.sched_getaffinity(0))
    num_frames = int(config["input"].get("num_frames", 16))
    crop = int(config["input"].get("crop_size", 224))
    import python_reference as ref  # noqa: PLC0415

    frame_flops = 2 * ref.backbone_macs(crop)
    bin_dir = args.bin_dir
    server = serving.Server(os.path.join(bin_dir, "vidclf-server"), args.repository, [],
                            "vidclf")
    # The in-process engines: the server's defaults, and each lever the report compares with them.
    inprocess = {variant: InProcess(os.path.join(bin_dir, "vidclf-e2e-bench"), args.repository,
                                    cores, flags)
                 for variant, flags in INPROCESS_FLAGS.items()}
    python = PythonPipeline(bundle, cores, files[0])
    client = os.path.join(bin_dir, "vidclf")
    try:
        for path in files:  # warm every pipeline on every file
            for engine in inprocess.values():
                engine.classify(path)
            grpc_latency(client, server, path)
            python.classify(path)
        samples = {info["name"]: {} for info in infos}
        peaks = []
        variants = [*INPROCESS_FLAGS, "inproc fast", "grpc exact", "grpc cold", "grpc fast",
                    "python", "plan exact", "plan fast", "plan threaded", "cli all",
                    "cli keyframes"]
        for round_index in range(args.rounds):
            log(f"round {round_index + 1} of {args.rounds}")
            peaks.append(serving.sgemm_peak(cores, repeats=5))
            shift = round_index % len(files)
            for path, info in list(zip(files, infos))[shift:] + list(zip(files, infos))[:shift]:
                turn = variants[round_index % len(variants):] + variants[:round_index %
                                                                         len(variants)]
                for variant in turn:
                    value = run_variant(variant, path, inprocess, server, client, python, cores,
                                        num_frames)
                    samples[info["name"]].setdefault(variant, []).append(value)
        peaks.append(serving.sgemm_peak(cores, repeats=5))
    finally:
        python.stop()
        for engine in inprocess.values():
            engine.stop()
        server.stop()
    peak = max(peaks)
    per_file = []
    for info in infos:
        got = samples[info["name"]]
        frames = min(num_frames, info["frames"])
        backbone_s = frames * frame_flops / (peak * 1e9)
        row = {"name": info["name"], "backbone_s": backbone_s}
        for variant in (*INPROCESS_FLAGS, "inproc fast"):
            row[variant] = median([r["wall_s"] for r in got[variant]])
            row[variant + " stages"] = {
                key: median([r[key] for r in got[variant]])
                for key in ("queue_s", "decode_s", "preprocess_s", "embed_s", "head_s")}
            row[variant + " top"] = got[variant][-1]["top"]
            row[variant + " score"] = got[variant][-1]["score"]
        for variant in ("grpc exact", "grpc cold", "grpc fast", "cli all", "cli keyframes"):
            row[variant] = median(got[variant])
        row["python"] = median([info_["total_s"] for _, info_ in got["python"]])
        row["python stages"] = {
            key: median([info_[key] for _, info_ in got["python"]])
            for key in ("demux_s", "decode_s", "preprocess_s", "embed_s", "head_s")}
        for variant in ("plan exact", "plan fast"):
            row[variant] = median([plan["cpu_s"] for plan in got[variant]])
            row[variant + " frames"] = got[variant][-1]["frames"]
            row["limit " + variant.split()[1]] = row[variant] / cores + backbone_s
        row["plan threaded"] = median([plan["wall_s"] for plan in got["plan threaded"]])
        row["limit threaded"] = row["plan threaded"] + backbone_s
        per_file.append(row)
    return {"cores": cores, "decoder_threads": FRAME_THREADS_PER_CORE * cores,
            "num_frames": num_frames, "crop": crop, "frame_gflop": frame_flops / 1e9,
            "sgemm_gflops": peak, "files": per_file}


def run_variant(variant, path, inprocess, server, client, python, cores, num_frames):
    if variant in inprocess:
        return inprocess[variant].classify(path)
    if variant == "inproc fast":
        return inprocess["inproc exact"].classify(path, FAST)
    if variant == "grpc exact":
        return grpc_latency(client, server, path)
    if variant == "grpc cold":
        return grpc_latency(client, server, path, warm=False)
    if variant == "grpc fast":
        return grpc_latency(client, server, path, FAST)
    if variant == "python":
        return python.classify(path)
    if variant == "plan exact":
        return decode_plan(path, num_frames, fast=False)
    if variant == "plan fast":
        return decode_plan(path, num_frames, fast=True)
    if variant == "plan threaded":  # as vidclf's single decoder
        return decode_plan(path, num_frames, fast=False, threads=FRAME_THREADS_PER_CORE * cores)
    if variant == "cli all":
        return ffmpeg_wall(path, cores, keyframes_only=False)
    if variant == "cli keyframes":
        return ffmpeg_wall(path, cores, keyframes_only=True)
    raise ValueError(variant)


# ---------------------------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------------------------


def ms(seconds):
    return f"{seconds * 1000:.0f}"


def ratio(a, b):
    return f"{a / b:.2f}"


def plot(data, path):
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    rows = data["measured"]["files"]
    names = [os.path.splitext(r["name"])[0] for r in rows]
    series = [("limit, exact", "limit exact"), ("limit, libavcodec's threads", "limit threaded"),
              ("vidclf in-process", "inproc exact"), ("vidclf gRPC", "grpc exact"),
              ("Python", "python"), ("vidclf gRPC, fast decoding", "grpc fast"),
              ("limit, fast", "limit fast")]
    width = 0.115
    fig, ax = plt.subplots(figsize=(11, 4.8))
    for i, (label, key) in enumerate(series):
        ax.bar([x + (i - 3) * width for x in range(len(rows))],
               [r[key] * 1000 for r in rows], width, label=label)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(names, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("ms per clip (median), concurrency 1")
    ax.set_title("One clip end to end: vidclf, the Python pipeline and the limits")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def add_lever_table(add, rows, intro, variant, default_name, lever_name, stages):
    """A table of the in-process engine with the server's defaults against `variant`, one lever
    changed: both latencies, lever / default, and each of `stages` for both."""
    add(intro)
    add("")
    stage_heads = " | ".join(f"{stage}: {default_name} | {stage}: {lever_name}" for stage in stages)
    add(f"| file | {default_name} (default) | {lever_name} | {lever_name} / {default_name} | "
        f"{stage_heads} |")
    add("|---" * (4 + 2 * len(stages)) + "|")
    for r in rows:
        default, lever = r["inproc exact stages"], r[variant + " stages"]
        stage_cells = " | ".join(f"{ms(default[stage + '_s'])} | {ms(lever[stage + '_s'])}"
                                 for stage in stages)
        add(f"| {r['name']} | {ms(r['inproc exact'])} | {ms(r[variant])} | "
            f"{ratio(r[variant], r['inproc exact'])} | {stage_cells} |")
    add("")


def write_report(path, data, plot_name):
    m = data["measured"]
    rows = m["files"]
    lines = []
    add = lines.append
    facts = data["machine"]
    add("# Performance: one clip end to end, against the Python pipeline and the limits")
    add("")
    add(f"Written by `make bench-e2e` (bench/e2e/run_benchmark.py) on {data['date']}; the run "
        f"took {data['minutes']:.0f} minutes. Every number below comes from that one run.")
    add("")
    add("## What was measured")
    add("")
    add(f"One clip at a time (concurrency 1): the demo model, {m['num_frames']} frames sampled "
        f"uniformly, {m['crop']}x{m['crop']} crops. Each of {data['rounds']} rounds times every "
        "pipeline once on every file, in an order that rotates from round to round; the tables "
        "give medians over the rounds.")
    add("")
    add("- **in-process**: vidclf's engine (decode stage, backbone batcher, head stage) with the "
        "server's defaults, called directly by `vidclf-e2e-bench` (from submission to answer).")
    add("- **gRPC**: `vidclf-server` on loopback with its defaults, called by `vidclf bench` "
        "(from sending the file's bytes to the answer), after one untimed call on the same "
        "channel; **gRPC, new connection**: the first call on a new channel.")
    add("- **fast**: the same with `snap_to_keyframes` and `skip_loop_filter` (opt-in sampling "
        "options); the default decodes exactly.")
    add("- **overlap**: in-process with `--embed-while-decoding`: each frame goes to the backbone "
        "as it is decoded, beside the decoder, instead of the call's frames waiting for its "
        "decoder to finish.")
    add("- **one decoder**: in-process with `--nosplit_at_keyframes`: a call decoding alone "
        "keeps one decoder with two frame threads per core, where by default it splits its "
        "frames at a keyframe between two decoders side by side, each with half the threads, "
        "when the keyframes allow an even split (`ClipOptions::split_at_keyframes`).")
    add("- **unbound**: in-process with `--nobind_backbone_threads`: the backbone's intra-op "
        "threads left to the kernel, where by default, in a process that may run on exactly the "
        "cores it budgets, they are bound one per CPU (`EngineOptions::bind_backbone_threads`). "
        "The Python pipeline leaves its threads to the kernel, as torch does by default.")
    add("- **fused**: in-process with `--backbone_kernels fused`: the fused backbone on "
        "LibTorch's oneDNN calls, where by default it runs on oneDNN's own primitives, its 3x3 "
        "convolutions of frames of 14x14 or more on oneDNN's Winograd kernels "
        "(`model/onednn_resnet18.h`).")
    add("- **Python**: `bench/serving/python_reference.py` in one process with "
        f"{m['cores']} torch and {m['cores']} decoder threads: PyAV decoding that seeks to "
        "keyframes and skips unwanted non-reference frames as the server does, swscale resize "
        "and crop, torchvision ResNet18 in channels-last, the same GRU head. It reads the file "
        "itself (no transfer).")
    add(f"- **limit**: the CPU time of libavcodec (through PyAV, one thread, no conversion) "
        "decoding exactly the frames vidclf's decoder decodes, divided by the "
        f"{m['cores']} cores, plus the backbone's FLOPs ({m['frame_gflop']:.3f} GFLOP per "
        f"frame) at the best torch.mm rate of the run on 2048x2048 float32 with all cores "
        f"({m['sgemm_gflops']:.0f} GFLOP/s). Conversion, the head, transfer and scheduling "
        "are left out, so no pipeline reaches it: it assumes one call's decoding splits "
        "perfectly over the cores, which frame threads do not reach within a group of pictures.")
    add(f"- **limit, libavcodec's threads**: the same frames decoded by libavcodec with "
        f"{m['decoder_threads']} frame threads (two per core, as vidclf's single decoder and the "
        "ffmpeg CLI run it), wall time through PyAV, plus the same backbone time: the limit as "
        "the performance issue defines it, the ffmpeg CLI's decoder on what the sampling "
        "needs. vidclf's two decoders side by side can beat it where keyframes allow a split.")
    add("- **ffmpeg CLI**: `ffmpeg -threads N -i FILE -map 0:v:0 -f null -` (every frame) and "
        "the same with `-skip_frame nokey` (keyframes only), wall time from spawn to exit, "
        "start-up included: a cross-check of the decoder's speed, not a limit for sampled "
        "clips.")
    add("")
    add("## Machine")
    add("")
    add(f"- {facts['cores']} cores: {facts['cpu']}; Linux {facts['kernel']}")
    add(f"- Python {facts['python']}, torch {facts['torch']}, torchvision "
        f"{facts['torchvision']}, PyAV {facts['pyav']} (libavcodec {facts['libavcodec']})")
    add(f"- {facts['ffmpeg']}")
    if facts.get("openblas_coretype"):
        add(f"- OpenBLAS kernels: {facts['openblas_coretype']} (`OPENBLAS_CORETYPE`, which "
            "vidclf's programs set for themselves where OpenBLAS does not know the CPU; the run and its "
            "Python pipeline run with it too)")
    load = facts["load_average_start"]
    add(f"- load average when the run started: {load[0]:.2f} (1 min), {load[1]:.2f} (5 min)")
    add("")
    add("## Files")
    add("")
    add("| file | codec | size | frames | keyframes | seconds | MB |")
    add("|---|---|---|---|---|---|---|")
    for info in data["files"]:
        add(f"| {info['name']} | {info['codec']} {info['profile']} {info['pix_fmt']} | "
            f"{info['width']}x{info['height']} | {info['frames']} | {info['keyframes']} | "
            f"{info['seconds']:.1f} | {info['bytes'] / 1e6:.1f} |")
    add("")
    add("cockatoo.mp4 and realshort.mp4 are python3-imageio's samples. The others are made by "
        f"the run: `ffmpeg -f lavfi -i testsrc2=size=WxH:rate=25,noise=alls=6:allf=t -t "
        f"{SECONDS}` encoded with libx264 (veryfast), libx265 (ultrafast) or libvpx-vp9 "
        "(realtime, cpu-used 8, in WebM) at most 3 Mbit/s (720p) or 6 Mbit/s (1080p), a "
        "keyframe every GOP frames and no scene-cut keyframes.")
    add("")
    add(f"![latency per file]({plot_name})")
    add("")
    add("## Latency of one clip, exact decoding (ms, median)")
    add("")
    add("| file | limit | limit, libavcodec's threads | in-process | gRPC | gRPC, new connection | "
        "Python | gRPC / limit | gRPC / limit, libavcodec's threads | gRPC / Python | "
        "in-process / limit | limit, libavcodec's threads / Python |")
    add("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        add(f"| {r['name']} | {ms(r['limit exact'])} | {ms(r['limit threaded'])} | "
            f"{ms(r['inproc exact'])} | {ms(r['grpc exact'])} | {ms(r['grpc cold'])} | "
            f"{ms(r['python'])} | {ratio(r['grpc exact'], r['limit exact'])} | "
            f"{ratio(r['grpc exact'], r['limit threaded'])} | "
            f"{ratio(r['grpc exact'], r['python'])} | "
            f"{ratio(r['inproc exact'], r['limit exact'])} | "
            f"{ratio(r['limit threaded'], r['python'])} |")
    add("")
    add("The last column is the ratio to Python's latency of the limit with libavcodec's "
        "threads: one decoder with its frame threads, then the backbone at the matrix-product "
        "peak, and nothing else. Where it is over "
        f"{TARGET_PYTHON_RATIO}, vidclf meets the {TARGET_PYTHON_RATIO}x-Python target only by "
        "decoding faster than that: by splitting a call between two decoders at a keyframe, "
        "which a file with one keyframe does not allow. The Python pipeline decodes with the "
        "same library.")
    add("")
    add("Where the time goes (ms, medians). vidclf's stages follow each other: a call's frames "
        "are embedded once its decoder is done, with a call decoding alone running two frame "
        "threads per core (split between two decoders where the keyframes allow); the Python "
        "pipeline decodes with one thread per core:")
    add("")
    add(f"| file | limit: decode CPU (1 thread) | frames decoded | libavcodec, "
        f"{m['decoder_threads']} frame threads: decode wall | limit: backbone | vidclf decode "
        "| vidclf embed | vidclf head | Python decode | Python embed |")
    add("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        s = r["inproc exact stages"]
        p = r["python stages"]
        add(f"| {r['name']} | {ms(r['plan exact'])} | {r['plan exact frames']} | "
            f"{ms(r['plan threaded'])} | {ms(r['backbone_s'])} | {ms(s['decode_s'])} | "
            f"{ms(s['embed_s'])} | "
            f"{ms(s['head_s'])} | {ms(p['decode_s'])} | {ms(p['embed_s'])} |")
    add("")
    add_lever_table(add, rows, "Embedding once the call's decoder is done (the default) against "
                    "embedding each frame as it is decoded (`--embed-while-decoding`), in-process "
                    "(ms, median):", "inproc overlap", "wait", "overlap", ("decode", "embed"))
    add("Two decoders side by side, each from a keyframe (the default), against one decoder "
        "for the whole call (`--nosplit_at_keyframes`), in-process (ms, median). Files with "
        "one keyframe, or keyframes that leave one side most of the work, decode with one "
        "either way:")
    add("")
    add("| file | keyframes | two decoders (default) | one decoder | one / two | decode: two "
        "| decode: one |")
    add("|---|---|---|---|---|---|---|")
    for r, info in zip(rows, data["files"]):
        two = r["inproc exact stages"]
        one = r["inproc one decoder stages"]
        add(f"| {r['name']} | {info['keyframes']} | {ms(r['inproc exact'])} | "
            f"{ms(r['inproc one decoder'])} | {ratio(r['inproc one decoder'], r['inproc exact'])} "
            f"| {ms(two['decode_s'])} | {ms(one['decode_s'])} |")
    add("")
    add_lever_table(add, rows, "The backbone's intra-op threads bound one per CPU (the default) "
                    "against left to the kernel (`--nobind_backbone_threads`), in-process (ms, "
                    "median):", "inproc unbound", "bound", "unbound", ("embed",))
    add_lever_table(add, rows, "The backbone with Winograd's 3x3 kernels (the default) against "
                    "the fused one on LibTorch's oneDNN calls (`--backbone_kernels fused`), "
                    "in-process (ms, median); the top label and its score, from the last round, "
                    "are each file's:", "inproc fused", "Winograd", "fused", ("embed",))
    add("| file | top label, Winograd | score, Winograd | top label, fused | score, fused |")
    add("|---|---|---|---|---|")
    for r in rows:
        add(f"| {r['name']} | {r['inproc exact top']} | {r['inproc exact score']:.4f} | "
            f"{r['inproc fused top']} | {r['inproc fused score']:.4f} |")
    add("")
    add("## Fast decoding (ms, median)")
    add("")
    add("| file | limit, fast | in-process, fast | gRPC, fast | gRPC fast / exact | "
        "frames decoded, fast (exact) | ffmpeg CLI all frames | ffmpeg CLI keyframes |")
    add("|---|---|---|---|---|---|---|---|")
    for r in rows:
        add(f"| {r['name']} | {ms(r['limit fast'])} | {ms(r['inproc fast'])} | "
            f"{ms(r['grpc fast'])} | {ratio(r['grpc fast'], r['grpc exact'])} | "
            f"{r['plan fast frames']} ({r['plan exact frames']}) | {ms(r['cli all'])} | "
            f"{ms(r['cli keyframes'])} |")
    add("")
    acc = data.get("accuracy")
    if acc:
        add("## Accuracy cost of fast decoding")
        add("")
        add(f"The {acc['videos']} test videos of the training benchmark (`vidclf-train synth`, "
            "split 1: 96-192 pixel clips in MPEG-4 Part 2, MJPEG and H.264, whose GOPs are "
            "those of FFmpeg's encoders), classified in-process by the demo model, as made and "
            f"re-encoded as H.264 with a keyframe every {SHORT_GOP} frames. Agreement: the "
            "share of videos whose top label is the one exact decoding gives.")
        add("")
        add("| videos | decoding | accuracy | agreement with exact |")
        add("|---|---|---|---|")
        for name, variants in acc["sets"].items():
            for variant, got in variants.items():
                add(f"| {name} | {variant} | {got['accuracy']:.3f} | {got['agreement']:.3f} |")
        add("")
    add("## Targets")
    add("")
    for line in data["targets"]:
        add(f"- {line}")
    add("")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def evaluate_targets(m):
    rows = m["files"]
    worst = max(rows, key=lambda r: r["grpc exact"] / r["limit exact"])
    within = all(r["grpc exact"] <= TARGET_LIMIT_RATIO * r["limit exact"] for r in rows)
    worst_threaded = max(rows, key=lambda r: r["grpc exact"] / r["limit threaded"])
    within_threaded = all(
        r["grpc exact"] <= TARGET_LIMIT_RATIO * r["limit threaded"] for r in rows)
    ratios = [r["grpc exact"] / r["python"] for r in rows]
    worst_python = max(rows, key=lambda r: r["grpc exact"] / r["python"])
    targets = [
        f"gRPC latency within {TARGET_LIMIT_RATIO}x of the limit on every file, exact decoding: "
        f"worst {worst['name']}, {worst['grpc exact'] / worst['limit exact']:.2f}x — "
        f"{serving.verdict(within)}",
        f"gRPC latency within {TARGET_LIMIT_RATIO}x of the limit with libavcodec's threads on "
        f"every file, exact decoding: worst {worst_threaded['name']}, "
        f"{worst_threaded['grpc exact'] / worst_threaded['limit threaded']:.2f}x — "
        f"{serving.verdict(within_threaded)}",
        f"gRPC latency at most {TARGET_PYTHON_RATIO}x Python's: median over the files "
        f"{statistics.median(ratios):.2f}x, worst {worst_python['name']} "
        f"{max(ratios):.2f}x — {serving.verdict(max(ratios) <= TARGET_PYTHON_RATIO)}",
    ]
    missed = [r for r in rows if r["grpc exact"] > TARGET_PYTHON_RATIO * r["python"]]
    if missed:
        targets.append(
            f"where gRPC is over {TARGET_PYTHON_RATIO}x Python's, the limit with libavcodec's "
            "threads against Python's: " + ", ".join(
                f"{r['name']} {r['grpc exact'] / r['python']:.2f}x against "
                f"{r['limit threaded'] / r['python']:.2f}x" for r in missed))
    return targets


def main(argv=None):
    serving.use_blas_kernels_of_this_cpu()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--repository", required=True)
    parser.add_argument("--synthetic-data", default="",
                        help="vidclf-train synth's output, for the accuracy of fast decoding")
    parser.add_argument("--output", required=True)
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--from-json", default="",
                        help="write the report and plot from a run's e2e-benchmark.json instead "
                             "of measuring")
    args = parser.parse_args(argv)
    if args.from_json:
        with open(args.from_json, encoding="utf-8") as f:
            data = json.load(f)
        data["targets"] = evaluate_targets(data["measured"])
        plot_path = os.path.splitext(args.output)[0] + ".png"
        plot(data, plot_path)
        write_report(args.output, data, os.path.basename(plot_path))
        return 0
    started = time.time()
    os.makedirs(args.work_dir, exist_ok=True)
    facts = serving.machine_facts()
    files = make_files(args.work_dir)
    infos = [serving.probe(path) for path in files]
    bundle = serving.find_bundle(args.repository, "demo")
    with open(os.path.join(bundle, "model.json"), encoding="utf-8") as f:
        config = json.load(f)
    measured = measure(args, files, infos, bundle, config)
    data = {"machine": facts, "files": infos, "rounds": args.rounds, "measured": measured}
    if args.synthetic_data:
        engine = InProcess(os.path.join(args.bin_dir, "vidclf-e2e-bench"), args.repository,
                           measured["cores"])
        try:
            data["accuracy"] = measure_accuracy(engine, args.synthetic_data, args.work_dir)
        finally:
            engine.stop()
    data["targets"] = evaluate_targets(measured)
    data["date"] = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    data["minutes"] = (time.time() - started) / 60
    with open(os.path.join(args.work_dir, "e2e-benchmark.json"), "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
    plot_path = os.path.splitext(args.output)[0] + ".png"
    plot(data, plot_path)
    write_report(args.output, data, os.path.basename(plot_path))
    log(f"wrote {args.output} and {plot_path}")
    for line in data["targets"]:
        log(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
