#!/usr/bin/env python3
"""The serving benchmark behind `make bench-serving`: writes docs/serving-benchmark.md.

In one run, on one machine, it measures:

* the machine's limit for this work: per test file, the CPU time that decoding takes on one core
  and the ResNet18 backbone's FLOPs divided by the single-precision matrix-product (sgemm) rate
  this run measures, giving the clips per second the cores could finish if they did nothing else;
* vidclf-server, loaded by `vidclf bench` (closed loop) at each concurrency, once with the
  default flags (cross-call batching) and once with --max-batch-frames 1 (no batching), plus one
  single-file run for the latency spread;
* bench/serving/python_reference.py, a careful Python pipeline doing the same work (PyAV decode
  of the same sampled frames, torchvision ResNet18, the same GRU head), at the same concurrencies,
  with 1 worker of all the cores' threads and with one single-threaded worker per core;
* the server's resident memory when idle and 10 seconds after each load.

The configurations take turns within each round (their order rotates from round to round), and
the tables give medians over the rounds. Every number in the report comes from the run itself.

Usage (what `make bench-serving` runs):
  python3 bench/serving/run_benchmark.py --server-binary build/bin/vidclf-server \\
      --client-binary build/bin/vidclf --train-binary build/bin/vidclf-train \\
      --output docs/serving-benchmark.md --work-dir build/serving-bench

At the defaults a round sends 24 requests at each of 5 concurrencies for each of 5
configurations (600 clips), and there are 3 rounds: at about one clip per second on two cores that
is roughly half an hour. The report says how long the run took.

--python-only skips the server (no client or server binary needed) and reports the limit and the
Python pipeline; --quick makes a short trial run (1 round, 4 requests, concurrency 1 and 2) to
check that everything works. Needs ffmpeg and ffprobe, python3-av, python3-imageio (its sample
video), python3-torch and python3-torchvision.
"""

import argparse
import datetime
import json
import os
import platform
import re
import resource
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCE = os.path.join(HERE, "python_reference.py")
sys.path.insert(0, HERE)

DEFAULT_LEVELS = [1, 2, 4, 8, 16]

# Generated test files: name, lavfi source, seconds. All H.264 (libx264 defaults: B-frames, CABAC)
# with a keyframe at most every 250 frames, yuv420p.
GENERATED = [
    ("testsrc2-1280x720-25fps-10s.mp4", "testsrc2=size=1280x720:rate=25", 10),
    ("testsrc2-1920x1080-25fps-10s.mp4", "testsrc2=size=1920x1080:rate=25", 10),
    ("testsrc2-854x480-30fps-4s.mp4", "testsrc2=size=854x480:rate=30", 4),
    ("life-640x360-30fps-3s.mp4",
     "life=size=640x360:rate=30:mold=10:ratio=0.15:death_color=#C83232:life_color=#00ff00", 3),
]
SINGLE_FILE = GENERATED[0][0]

# Targets checked at the end.
TARGET_LIMIT_FRACTION = 0.85  # vidclf clips/s at concurrency 8, against the limit
TARGET_PYTHON_RATIO = 1.5  # vidclf clips/s at concurrency 8, against Python's
TARGET_LATENCY_RATIO = 0.75  # vidclf p50 at concurrency 1, against Python's
TARGET_TAIL_RATIO = 2.0  # single-file p99 against p50, every concurrency
TARGET_IDLE_RSS = 300e6  # bytes
TARGET_RSS_RETURN = 0.20  # RSS 10 s after load, within this fraction of idle


def log(message):
    stamp = datetime.datetime.now().strftime("%H:%M:%S")
    print(f"[{stamp}] {message}", file=sys.stderr, flush=True)


def run(command, **kwargs):
    return subprocess.run(command, check=True, stdin=subprocess.DEVNULL, **kwargs)


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


# ---------------------------------------------------------------------------------------------
# Test files and the model
# ---------------------------------------------------------------------------------------------


def find_cockatoo():
    """python3-imageio's sample video (H.264, 1280x720, yuv444p)."""
    try:
        import importlib.util  # noqa: PLC0415

        spec = importlib.util.find_spec("imageio")
        if spec and spec.origin:
            path = os.path.join(os.path.dirname(spec.origin), "resources", "images",
                                "cockatoo.mp4")
            if os.path.exists(path):
                return path
    except (ImportError, ValueError):
        pass
    try:
        listed = subprocess.run(["dpkg", "-L", "python3-imageio"], capture_output=True,
                                text=True, check=False).stdout.split()
        for path in listed:
            if path.endswith("/cockatoo.mp4") and os.path.exists(path):
                return path
    except OSError:
        pass
    return None


def make_files(work_dir):
    directory = os.path.join(work_dir, "files")
    os.makedirs(directory, exist_ok=True)
    files = []
    cockatoo = find_cockatoo()
    if cockatoo:
        files.append(cockatoo)
    else:
        log("python3-imageio's cockatoo.mp4 not found; going on without it")
    for name, source, seconds in GENERATED:
        path = os.path.join(directory, name)
        if not os.path.exists(path):
            log(f"encoding {name}")
            partial = path + ".part.mp4"
            run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-f", "lavfi", "-i", source,
                 "-t", str(seconds), "-c:v", "libx264", "-g", "250", "-pix_fmt", "yuv420p",
                 partial])
            os.replace(partial, path)
        files.append(path)
    return files


def probe(path):
    out = subprocess.run(
        ["ffprobe", "-v", "error", "-select_streams", "v:0", "-count_packets", "-show_entries",
         "stream=codec_name,profile,width,height,pix_fmt,avg_frame_rate,nb_read_packets:"
         "format=duration,size", "-of", "json", path],
        capture_output=True, text=True, check=True).stdout
    info = json.loads(out)
    stream = info["streams"][0]
    flags = subprocess.run(
        ["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "packet=flags",
         "-of", "csv=p=0", path], capture_output=True, text=True, check=True).stdout.split()
    num, den = (int(x) for x in stream.get("avg_frame_rate", "0/1").split("/"))
    return {
        "name": os.path.basename(path),
        "codec": stream.get("codec_name"),
        "profile": stream.get("profile"),
        "width": stream.get("width"),
        "height": stream.get("height"),
        "pix_fmt": stream.get("pix_fmt"),
        "fps": num / den if den else None,
        "frames": int(stream.get("nb_read_packets", 0)),
        "keyframes": sum(1 for f in flags if "K" in f),
        "seconds": float(info["format"].get("duration", 0)),
        "bytes": int(info["format"].get("size", 0)),
    }


def find_bundle(repository, name=None):
    """REPO/<name>/<highest version>/ of the model the server serves by default (the first name,
    or `name`)."""
    names = sorted(d for d in os.listdir(repository)
                   if os.path.isdir(os.path.join(repository, d)))
    if name is None:
        if not names:
            return None
        name = names[0]
    directory = os.path.join(repository, name)
    if not os.path.isdir(directory):
        return None
    versions = [v for v in os.listdir(directory)
                if os.path.exists(os.path.join(directory, v, "model.json"))]
    if not versions:
        return None
    versions.sort(key=lambda v: (0, int(v)) if v.isdigit() else (1, v))
    return os.path.join(directory, versions[-1])


# ---------------------------------------------------------------------------------------------
# The machine's limit
# ---------------------------------------------------------------------------------------------


def children_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def ffmpeg_decode_cpu(path):
    """CPU seconds (user + system) of `ffmpeg -threads 1` decoding the video stream to nothing,
    the command-line tool's own start-up included."""
    before = children_cpu_seconds()
    run(["ffmpeg", "-nostdin", "-loglevel", "error", "-threads", "1", "-i", path, "-map",
         "0:v:0", "-f", "null", "-"])
    return children_cpu_seconds() - before


def decode_cpu(path, mode, num_frames):
    """CPU seconds of libavcodec (through PyAV) decoding `path` on one thread, no conversion.

    mode "all": every frame; "noref": every non-reference frame dropped (-skip_frame noref);
    "sampled": what the server decodes for uniform sampling of `num_frames` frames, every packet
    up to the last kept frame with the decoder dropping the non-reference frames it does not
    keep.
    """
    import av  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415

    import python_reference as ref  # noqa: PLC0415

    start = time.process_time()
    if mode == "sampled":
        nothing = np.zeros(1, dtype=np.uint8)
        ref.decode_sampled(path, num_frames, lambda frame, sar: nothing, decoder_threads=1,
                           skip_nonref=True)
        return time.process_time() - start
    with av.open(path) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        stream.thread_count = 1
        if mode == "noref":
            stream.codec_context.skip_frame = "NONREF"
        for packet in container.demux(stream):
            for _ in packet.decode():
                pass
    return time.process_time() - start


def use_blas_kernels_of_this_cpu():
    """Starts this script again with the OPENBLAS_CORETYPE that vidclf's programs choose for
    themselves (model/library_settings.h) where OpenBLAS runs its generic kernels on a CPU newer
    than its tables, so that torch.mm's peak and the Python pipeline run the kernels vidclf runs."""
    if "OPENBLAS_CORETYPE" in os.environ:
        return
    import ctypes  # noqa: PLC0415

    try:
        openblas = ctypes.CDLL("libopenblas.so.0")
    except OSError:
        return
    openblas.openblas_get_corename.restype = ctypes.c_char_p
    if openblas.openblas_get_corename() != b"Prescott":
        return
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        flags = set(next(line for line in f if line.startswith("flags")).split(":")[1].split())
    if {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= flags:
        os.environ["OPENBLAS_CORETYPE"] = "SkylakeX"
    elif {"avx2", "fma"} <= flags:
        os.environ["OPENBLAS_CORETYPE"] = "Haswell"
    else:
        return
    os.execv(sys.executable, [sys.executable, *sys.argv])


def sgemm_peak(cores, repeats):
    """Best GFLOP/s of torch.mm on 2048x2048 float32 with all cores."""
    import torch  # noqa: PLC0415

    torch.set_num_threads(cores)
    n = 2048
    a = torch.randn(n, n)
    b = torch.randn(n, n)
    for _ in range(3):
        torch.mm(a, b)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - start)
    return 2.0 * n ** 3 / best / 1e9


def measure_limit(files, infos, config, cores, rounds):
    import python_reference as ref  # noqa: PLC0415

    crop = int(config["input"].get("crop_size", 224))
    num_frames = int(config["input"].get("num_frames", 16))
    macs = ref.backbone_macs(crop)
    frame_flops = 2 * macs
    log("measuring the sgemm rate")
    gflops = sgemm_peak(cores, repeats=max(10, 5 * rounds))
    per_core = gflops / cores
    per_file = []
    for path, info in zip(files, infos):
        log(f"timing decode of {info['name']}")
        all_frames = median([decode_cpu(path, "all", num_frames) for _ in range(rounds)])
        noref = median([decode_cpu(path, "noref", num_frames) for _ in range(rounds)])
        sampled = median([decode_cpu(path, "sampled", num_frames) for _ in range(rounds)])
        cli = median([ffmpeg_decode_cpu(path) for _ in range(rounds)])
        frames = min(num_frames, info["frames"]) if num_frames > 0 else info["frames"]
        backbone_s = frames * frame_flops / (per_core * 1e9)
        per_file.append({
            "name": info["name"],
            "decode_all_s": all_frames,
            "decode_noref_s": noref,
            "decode_sampled_s": sampled,
            "ffmpeg_cli_s": cli,
            "backbone_frames": frames,
            "backbone_gflop": frames * frame_flops / 1e9,
            "backbone_core_s": backbone_s,
        })

    def limit(key):
        # Files are sent round-robin, so a clip of the mix costs the mean of the files' costs.
        mean_cost = statistics.fmean(f[key] + f["backbone_core_s"] for f in per_file)
        return cores / mean_cost

    return {
        "cores": cores,
        "crop_size": crop,
        "num_frames": num_frames,
        "backbone_macs_per_frame": macs,
        "sgemm_gflops": gflops,
        "sgemm_gflops_per_core": per_core,
        "files": per_file,
        "limit_sampled": limit("decode_sampled_s"),
        "limit_all": limit("decode_all_s"),
        "limit_noref": limit("decode_noref_s"),
    }


# ---------------------------------------------------------------------------------------------
# The server
# ---------------------------------------------------------------------------------------------


class Server:
    """A vidclf-server on free loopback ports."""

    def __init__(self, binary, repository, extra_flags, label):
        self.label = label
        self.flags = list(extra_flags)
        self.lines = []
        self.address = None
        self.metrics_url = None
        self.http_port = None  # with --http-port
        self._ready = threading.Event()
        self.process = subprocess.Popen(
            [binary, "--model-repository", repository, "--grpc-port", "0", "--metrics-port",
             "0", "--host", "127.0.0.1", *extra_flags],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, bufsize=1)
        threading.Thread(target=self._read, daemon=True).start()
        if not self._ready.wait(180) or self.process.poll() is not None:
            self.stop()
            raise RuntimeError(f"vidclf-server ({label}) did not start:\n" +
                               "".join(self.lines[-20:]))
        # Wait until /metrics answers.
        for _ in range(100):
            if self.metric("process_resident_memory_bytes") is not None:
                break
            time.sleep(0.1)

    def _read(self):
        for line in self.process.stdout:
            self.lines.append(line)
            match = re.search(r"gRPC listening on (\S+):(\d+)", line)
            if match:
                self.address = f"{match.group(1)}:{match.group(2)}"
            match = re.search(r"metrics on (http://\S+/metrics)", line)
            if match:
                self.metrics_url = match.group(1)
            match = re.search(r"HTTP listening on \S+:(\d+)", line)
            if match:
                self.http_port = int(match.group(1))
            if self.address and self.metrics_url:
                self._ready.set()
        self._ready.set()

    def metric(self, name):
        """Sum of the samples of `name` on /metrics, or None."""
        try:
            with urllib.request.urlopen(self.metrics_url, timeout=5) as response:
                page = response.read().decode("utf-8", "replace")
        except OSError:
            return None
        total = None
        for line in page.splitlines():
            if line.startswith(name) and line[len(name):len(name) + 1] in (" ", "{"):
                try:
                    value = float(line.rsplit(" ", 1)[1])
                except ValueError:
                    continue
                total = value if total is None else total + value
        return total

    def banner(self, pattern):
        for line in self.lines:
            match = re.search(pattern, line)
            if match:
                return match
        return None

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def classify_once(client, server, path):
    out = run([client, "classify", path, "--server", server.address, "--json", "--top-k", "100"],
              capture_output=True, text=True).stdout
    return json.loads(out)


def run_vidclf_bench(client, server, files, levels, requests, extra=()):
    command = [client, "bench", *files, "--server", server.address, "--concurrency",
               ",".join(str(c) for c in levels), "--metrics-url", server.metrics_url, "--json",
               *extra]
    if requests > 0:
        command += ["--requests", str(requests)]
    result = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                            check=False)
    try:
        answer = json.loads(result.stdout)
    except json.JSONDecodeError:
        raise RuntimeError(f"`vidclf bench` failed (exit {result.returncode}): "
                           f"{result.stderr.strip()[-2000:] or result.stdout.strip()[-2000:]}")
    if result.returncode != 0:
        log(f"`vidclf bench` exited {result.returncode}: {result.stderr.strip()[-500:]}")
    return answer["levels"]


def run_python_bench(bundle, files, levels, requests, workers, threads, skip_nonref):
    command = [sys.executable, REFERENCE, "--model-dir", bundle, "--bench", *files,
               "--concurrency", ",".join(str(c) for c in levels), "--requests", str(requests),
               "--workers", str(workers), "--threads", str(threads)]
    if skip_nonref:
        command.append("--skip-nonref")
    out = run(command, capture_output=True, text=True).stdout
    answer = json.loads(out)
    return answer["levels"] if "levels" in answer else [answer]


def python_check(bundle, files, threads):
    out = run([sys.executable, REFERENCE, "--model-dir", bundle, "--check", *files, "--threads",
               str(threads)], capture_output=True, text=True).stdout
    return json.loads(out)["results"]


# ---------------------------------------------------------------------------------------------
# Machine facts
# ---------------------------------------------------------------------------------------------


def cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def memory_total():
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def short_library(path):
    """The last two parts of a library's path (e.g. openblas-pthread/libblas.so.3)."""
    parts = path.strip().split("/")
    return "/".join(parts[-2:]) if len(parts) >= 2 else path.strip()


def machine_facts():
    import av  # noqa: PLC0415
    import torch  # noqa: PLC0415
    import torchvision  # noqa: PLC0415

    facts = {
        "cores": len(os.sched_getaffinity(0)),
        "cpu": cpu_model(),
        "memory_bytes": memory_total(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "pyav": av.__version__,
        "libavcodec": ".".join(str(v) for v in av.library_versions.get("libavcodec", ())),
        "load_average_start": os.getloadavg(),
    }
    try:
        facts["ffmpeg"] = subprocess.run(["ffmpeg", "-version"], capture_output=True, text=True,
                                         check=False).stdout.splitlines()[0]
    except (OSError, IndexError):
        facts["ffmpeg"] = "unknown"
    facts["openblas_coretype"] = os.environ.get("OPENBLAS_CORETYPE", "")
    # The BLAS Python's torch uses: Debian's torch calls the system libblas.so.3.
    for candidate in ("/usr/lib/x86_64-linux-gnu/libblas.so.3",
                      "/usr/lib/aarch64-linux-gnu/libblas.so.3"):
        if os.path.exists(candidate):
            facts["python_blas"] = short_library(os.path.realpath(candidate))
            break
    return facts


# ---------------------------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------------------------


def fmt(value, digits=2, suffix=""):
    if value is None:
        return "n/a"
    return f"{value:.{digits}f}{suffix}"


def mb(value):
    return "n/a" if value is None else f"{value / 1e6:.0f} MB"


def aggregate(rounds_levels, levels):
    """Per concurrency, medians over rounds of each measured field."""
    table = {}
    for concurrency in levels:
        entries = [lvl for run_levels in rounds_levels for lvl in run_levels
                   if lvl.get("concurrency") == concurrency]
        if not entries:
            continue
        row = {"rounds": len(entries), "errors": sum(int(e.get("errors", 0)) for e in entries)}
        for key in ("clips_per_s", "p50_ms", "p95_ms", "p99_ms", "batch_frames_mean",
                    "server_rss_bytes", "frames_per_s"):
            row[key] = median([e.get(key) for e in entries])
        speeds = [e["clips_per_s"] for e in entries if e.get("clips_per_s") is not None]
        row["clips_per_s_min"] = min(speeds) if speeds else None
        row["clips_per_s_max"] = max(speeds) if speeds else None
        table[concurrency] = row
    return table


def verdict(ok):
    if ok is None:
        return "not measured"
    return "**met**" if ok else "**not met**"


def write_report(path, data):
    levels = data["levels"]
    facts = data["machine"]
    limit = data["limit"]
    lines = []
    add = lines.append
    add("# Serving benchmark: vidclf-server against a Python pipeline and the machine's limit")
    add("")
    add(f"Written by `{data['command']}` (bench/serving/run_benchmark.py) on "
        f"{data['date']}; the run took {data['minutes']:.0f} minutes. Every number below comes "
        "from that one run. "
        + ("This was a short trial run (`--quick`): too few requests for real numbers. "
           if data["quick"] else "")
        + ("The server was not run (`--python-only`). " if data["python_only"] else ""))
    add("")
    add("## What was measured")
    add("")
    add(f"Each round runs every configuration once, in an order that rotates from round to round; "
        f"rounds: {data['rounds']}; the tables give the median over them. A level sends "
        f"{data['requests_label']} Classify requests over the test files, round-robin, with "
        "*concurrency* requesters in a closed loop (each sends its next request when its answer "
        "arrives); latency is from sending to the answer, percentiles interpolated linearly.")
    add("")
    add("- **vidclf batched**: `vidclf-server` with its default flags (frames of concurrent calls "
        "share backbone batches), loaded by `vidclf bench`.")
    add("- **vidclf unbatched**: the same with `--max-batch-frames 1`.")
    if data.get("precisions"):
        add("- **vidclf batched " + "/".join(data["precisions"]) + "**: vidclf batched with "
            "`--precision` " + " or ".join(f"`{p}`" for p in data["precisions"]) +
            " (the backbone's precision; each a server of its own).")
    add(f"- **Python**: `bench/serving/python_reference.py`, the same work in Python: PyAV "
        "(libavcodec, frame and slice threads) decodes the stream, converting only the sampled "
        "frames (" + ("the decoder drops the unkept non-reference frames"
                      if data["python_skip_nonref"] else "decoding every frame up to the last "
                      "kept one") + "), swscale bilinear resize and centre crop, torchvision "
        "ResNet18 in channels-last under `torch.inference_mode()`, the same GRU head. "
        f"Run as 1 worker process of {facts['cores']} threads and as {facts['cores']} worker "
        "processes of 1 thread; each loads the model and classifies one clip before timing. "
        "The table shows the better of the two at each concurrency (by clips/s).")
    add("- Both servers were started once, at the start, and warmed with one request per file; "
        "the Python workers were warmed as said. The requesters run on the same machine: "
        "`vidclf bench` sends each file's bytes over gRPC on loopback, while the Python workers "
        "are handed a path and read the file themselves (from the page cache), so Python does "
        "no transfer.")
    add("")
    add("## Machine")
    add("")
    add(f"- {facts['cores']} cores: {facts['cpu']}; "
        f"{mb(facts.get('memory_bytes'))} of memory; Linux {facts['kernel']}")
    if data.get("server_banner"):
        add(f"- vidclf-server: {data['server_banner']}")
    add(f"- Python {facts['python']}, torch {facts['torch']}, torchvision "
        f"{facts['torchvision']}, PyAV {facts['pyav']} (libavcodec {facts['libavcodec']}), "
        f"BLAS {facts.get('python_blas', 'unknown')}")
    add(f"- {facts['ffmpeg']}")
    load = facts["load_average_start"]
    add(f"- load average when the run started: {load[0]:.2f} (1 min), {load[1]:.2f} (5 min); "
        "other work on the machine during the run lowers every number alike")
    add("")
    model = data["model"]
    add(f"Model: `{model['name']}` version {model['version']}, {model['head']} head, "
        f"{model['num_frames']} frames sampled uniformly, shorter side resized to "
        f"{model['resize_shorter_side']}, centre crop {model['crop_size']}x{model['crop_size']}.")
    add("")
    add("## Test files")
    add("")
    add("| file | codec | size | fps | frames | keyframes | seconds | MB |")
    add("|---|---|---|---|---|---|---|---|")
    for info in data["files"]:
        add(f"| {info['name']} | {info['codec']} {info.get('profile') or ''} {info['pix_fmt']} | "
            f"{info['width']}x{info['height']} | {fmt(info['fps'], 0)} | {info['frames']} | "
            f"{info['keyframes']} | {fmt(info['seconds'], 1)} | "
            f"{info['bytes'] / 1e6:.1f} |")
    add("")
    add("cockatoo.mp4 is python3-imageio's sample video; the others are made by the run with "
        "`ffmpeg -f lavfi -i SOURCE -t SECONDS -c:v libx264 -g 250 -pix_fmt yuv420p`.")
    add("")

    if data.get("agreement"):
        agree = data["agreement"]
        add("Both pipelines gave the same top label on "
            f"{agree['same_top']} of {agree['files']} files; the largest difference between "
            f"their probabilities was {agree['max_difference']:.4f} (the frames differ slightly: "
            "the server resizes only the cropped region, to RGBA).")
        add("")

    add("## The machine's limit")
    add("")
    add(f"A clip costs decoding plus {limit['num_frames']} backbone frames. ResNet18 at "
        f"{limit['crop_size']}x{limit['crop_size']} is "
        f"{limit['backbone_macs_per_frame'] / 1e9:.3f} GMAC per frame (counted from its "
        f"convolutions), {2 * limit['backbone_macs_per_frame'] / 1e9:.3f} GFLOP. torch.mm on "
        f"2048x2048 float32 with all {limit['cores']} cores ran at "
        f"{limit['sgemm_gflops']:.1f} GFLOP/s (best of the run), "
        f"{limit['sgemm_gflops_per_core']:.1f} per core; the backbone's time per clip on one core "
        "is its FLOPs at that rate. Decoding is CPU time (user + system) on one thread, median "
        "of the rounds:")
    add("")
    add("- *sampled*: what the server decodes for uniform sampling: every packet up to the last "
        "kept frame, the decoder dropping the non-reference frames it does not keep (the server "
        "also seeks past whole GOPs it does not need, which these files, with few keyframes, "
        "hardly allow);")
    add("- *all*: every frame;")
    add("- *noref*: every non-reference frame dropped (`-skip_frame noref`; a lower bound, as it "
        "drops kept frames too);")
    add("- timed in-process with libavcodec through PyAV on one thread (no conversion, no "
        "process start); `ffmpeg -threads 1 -i FILE -f null -`, which decodes every frame and "
        "includes the tool's start-up, is shown as a cross-check.")
    add("")
    add("| file | decode sampled (ms) | decode all (ms) | decode noref (ms) | ffmpeg CLI all (ms) "
        "| backbone GFLOP | backbone on one core (ms) |")
    add("|---|---|---|---|---|---|---|")
    for f in limit["files"]:
        add(f"| {f['name']} | {f['decode_sampled_s'] * 1e3:.0f} | {f['decode_all_s'] * 1e3:.0f} | "
            f"{f['decode_noref_s'] * 1e3:.0f} | {f['ffmpeg_cli_s'] * 1e3:.0f} | "
            f"{f['backbone_gflop']:.1f} | {f['backbone_core_s'] * 1e3:.0f} |")
    add("")
    add(f"Limit = cores / mean over the files of (decode + backbone on one core): "
        f"**{limit['limit_sampled']:.2f} clips/s** with the sampled decode, the one the targets "
        f"use ({limit['limit_all']:.2f} decoding every frame, {limit['limit_noref']:.2f} with "
        "noref). It leaves out frame conversion, the head, gRPC and the requesters, so no "
        "pipeline can reach it.")
    add("")

    batched = data["tables"].get("vidclf batched", {})
    unbatched = data["tables"].get("vidclf unbatched", {})
    python_best = data["python_best"]
    add("## Throughput and latency")
    add("")
    add("| concurrency | vidclf batched clips/s | p50 ms | p99 ms | vidclf unbatched clips/s | "
        "p50 ms | p99 ms | Python clips/s | p50 ms | p99 ms | Python config | "
        "batched / Python | batched / limit |")
    add("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for c in levels:
        b = batched.get(c, {})
        u = unbatched.get(c, {})
        p = python_best.get(c, {})
        ratio_python = (b["clips_per_s"] / p["clips_per_s"]
                        if b.get("clips_per_s") and p.get("clips_per_s") else None)
        ratio_limit = (b["clips_per_s"] / limit["limit_sampled"]
                       if b.get("clips_per_s") else None)
        add(f"| {c} | {fmt(b.get('clips_per_s'))} | {fmt(b.get('p50_ms'), 0)} | "
            f"{fmt(b.get('p99_ms'), 0)} | {fmt(u.get('clips_per_s'))} | "
            f"{fmt(u.get('p50_ms'), 0)} | {fmt(u.get('p99_ms'), 0)} | "
            f"{fmt(p.get('clips_per_s'))} | {fmt(p.get('p50_ms'), 0)} | "
            f"{fmt(p.get('p99_ms'), 0)} | {p.get('config', 'n/a')} | "
            f"{fmt(ratio_python)} | {fmt(ratio_limit)} |")
    add("")
    precisions = data.get("precisions") or []
    if precisions:
        add("## By backbone precision")
        add("")
        add("The batched server with `--precision` each of these, in the same rounds; "
            "concurrency 1 is the one-call latency.")
        add("")
        names = ["fp32", *precisions]
        tables = [batched, *[data["tables"].get(f"vidclf batched {p}", {}) for p in precisions]]
        add("| concurrency | " + " | ".join(f"{n} clips/s | {n} p50 ms" for n in names) + " |")
        add("|---|" + "---|---|" * len(names))
        for c in levels:
            cells = []
            for table in tables:
                row = table.get(c, {})
                cells += [fmt(row.get("clips_per_s")), fmt(row.get("p50_ms"), 0)]
            add(f"| {c} | " + " | ".join(cells) + " |")
        add("")
        for name, why in (data.get("refused_precisions") or {}).items():
            add(f"- {name} left out: the server refused it on this machine ({why}).")
        if data.get("refused_precisions"):
            add("")
    every_table = {**data["tables"], **data["python_tables"]}
    errors = {name: sum(row["errors"] for row in table.values())
              for name, table in every_table.items()}
    add("Failed requests: " + ", ".join(f"{name} {count}" for name, count in errors.items())
        + ".")
    add("")
    add("Spread of clips/s over the rounds (min to max):")
    add("")
    add("| concurrency | " + " | ".join(every_table) + " |")
    add("|---|" + "---|" * len(every_table))
    for c in levels:
        cells = []
        for table in every_table.values():
            row = table.get(c)
            cells.append(f"{fmt(row['clips_per_s_min'])} to {fmt(row['clips_per_s_max'])}"
                         if row else "n/a")
        add(f"| {c} | " + " | ".join(cells) + " |")
    add("")

    if data["python_tables"]:
        add("Python, each configuration (workers x threads):")
        add("")
        names = list(data["python_tables"])
        add("| concurrency | " + " | ".join(f"{n} clips/s | p50 ms | p99 ms" for n in names)
            + " |")
        add("|---|" + "---|---|---|" * len(names))
        for c in levels:
            cells = []
            for n in names:
                row = data["python_tables"][n].get(c, {})
                cells.append(f"{fmt(row.get('clips_per_s'))} | {fmt(row.get('p50_ms'), 0)} | "
                             f"{fmt(row.get('p99_ms'), 0)}")
            add(f"| {c} | " + " | ".join(cells) + " |")
        add("")
        stages = data.get("python_stages")
        if stages:
            add(f"Python's mean time per request in each stage at concurrency {levels[0]} (ms; "
                "decode excludes conversion): " + "; ".join(
                    f"{n}: " + ", ".join(f"{k} {v:.0f}" for k, v in st.items())
                    for n, st in stages.items()) + ".")
            add("")

    if batched or unbatched:
        add("## Batches formed")
        add("")
        add("Mean frames per backbone batch during each level (from `vidclf_batch_frames` on "
            "/metrics):")
        add("")
        add("| concurrency | batched | unbatched |")
        add("|---|---|---|")
        for c in levels:
            add(f"| {c} | {fmt(batched.get(c, {}).get('batch_frames_mean'), 1)} | "
                f"{fmt(unbatched.get(c, {}).get('batch_frames_mean'), 1)} |")
        add("")

    single = data["tables"].get("vidclf batched, single file", {})
    if single:
        add(f"## One file ({data['single_file']}), vidclf batched")
        add("")
        add("| concurrency | clips/s | p50 ms | p95 ms | p99 ms | p99 / p50 |")
        add("|---|---|---|---|---|---|")
        for c in levels:
            row = single.get(c, {})
            tail = (row["p99_ms"] / row["p50_ms"]
                    if row.get("p99_ms") and row.get("p50_ms") else None)
            add(f"| {c} | {fmt(row.get('clips_per_s'))} | {fmt(row.get('p50_ms'), 0)} | "
                f"{fmt(row.get('p95_ms'), 0)} | {fmt(row.get('p99_ms'), 0)} | {fmt(tail)} |")
        add("")

    memory = data.get("memory")
    if memory:
        add("## Server memory")
        add("")
        add("Resident memory (`process_resident_memory_bytes`): idle after start, after the "
            f"warm-up requests, and {data['settle_seconds']:.0f} s after each load ended.")
        add("")
        add("| server | idle | after warm-up | after load, per round |")
        add("|---|---|---|---|")
        for name, m in memory.items():
            add(f"| {name} | {mb(m['idle'])} | {mb(m['warm'])} | "
                + ", ".join(mb(v) for v in m["after_load"]) + " |")
        add("")

    add("## Targets")
    add("")
    for target in data["targets"]:
        add(f"- {target['what']}: {target['measured']} — {verdict(target['ok'])}")
    add("")
    add("Raw results of every round are in the run's work directory (serving-benchmark.json).")
    add("")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def evaluate_targets(data):
    levels = data["levels"]
    limit = data["limit"]["limit_sampled"]
    batched = data["tables"].get("vidclf batched", {})
    single = data["tables"].get("vidclf batched, single file", {})
    python_best = data["python_best"]
    python_latency = data["python_best_latency"]
    targets = []

    b8 = batched.get(8, {}).get("clips_per_s")
    targets.append({
        "what": f"concurrency 8: vidclf >= {TARGET_LIMIT_FRACTION:.0%} of the limit",
        "measured": (f"{b8:.2f} of {limit:.2f} clips/s = {b8 / limit:.0%}" if b8 else "n/a"),
        "ok": (b8 >= TARGET_LIMIT_FRACTION * limit) if b8 else None,
    })
    p8 = python_best.get(8, {}).get("clips_per_s")
    targets.append({
        "what": f"concurrency 8: vidclf >= {TARGET_PYTHON_RATIO}x Python's clips/s",
        "measured": (f"{b8:.2f} against {p8:.2f} clips/s = {b8 / p8:.2f}x"
                     if b8 and p8 else "n/a"),
        "ok": (b8 >= TARGET_PYTHON_RATIO * p8) if b8 and p8 else None,
    })
    b1 = batched.get(1, {}).get("p50_ms")
    p1 = python_latency.get(1, {}).get("p50_ms")
    targets.append({
        "what": f"concurrency 1: vidclf p50 latency <= {TARGET_LATENCY_RATIO}x Python's (the "
                "lower of its two configurations)",
        "measured": (f"{b1:.0f} against {p1:.0f} ms = {b1 / p1:.2f}x" if b1 and p1 else "n/a"),
        "ok": (b1 <= TARGET_LATENCY_RATIO * p1) if b1 and p1 else None,
    })
    tails = {c: single[c]["p99_ms"] / single[c]["p50_ms"] for c in levels
             if single.get(c, {}).get("p50_ms") and single.get(c, {}).get("p99_ms")}
    targets.append({
        "what": f"one file: p99 <= {TARGET_TAIL_RATIO}x p50 at every concurrency",
        "measured": (", ".join(f"{c}: {t:.2f}x" for c, t in tails.items()) if tails else "n/a"),
        "ok": (all(t <= TARGET_TAIL_RATIO for t in tails.values())
               and len(tails) == len(levels)) if tails else None,
    })
    memory = (data.get("memory") or {}).get("vidclf batched")
    idle = memory["idle"] if memory else None
    targets.append({
        "what": f"idle RSS <= {TARGET_IDLE_RSS / 1e6:.0f} MB",
        "measured": mb(idle) if idle else "n/a",
        "ok": (idle <= TARGET_IDLE_RSS) if idle else None,
    })
    after = [v for v in (memory["after_load"] if memory else []) if v is not None]
    worst = max(after, key=lambda v: abs(v - idle)) if after and idle else None
    targets.append({
        "what": f"RSS {data['settle_seconds']:.0f} s after load within "
                f"{TARGET_RSS_RETURN:.0%} of idle",
        "measured": (f"farthest {mb(worst)} against {mb(idle)} idle "
                     f"({(worst - idle) / idle:+.0%})" if worst else "n/a"),
        "ok": (abs(worst - idle) <= TARGET_RSS_RETURN * idle) if worst else None,
    })
    return targets


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------


def main(argv=None):
    use_blas_kernels_of_this_cpu()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server-binary", help="vidclf-server")
    parser.add_argument("--client-binary", help="vidclf (with the bench subcommand)")
    parser.add_argument("--train-binary", help="vidclf-train, to make the model if missing")
    parser.add_argument("--output", required=True, help="the markdown report to write")
    parser.add_argument("--work-dir", required=True,
                        help="test files, the model repository and raw results go here")
    parser.add_argument("--repository", help="an existing model repository to use")
    parser.add_argument("--model", help="the model's name (default: the first in the repository)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests-per-level", type=int, default=24,
                        help="requests per concurrency level (0: 8 per concurrency, at least 16)")
    parser.add_argument("--concurrency", default=",".join(str(c) for c in DEFAULT_LEVELS))
    parser.add_argument("--settle-seconds", type=float, default=10.0,
                        help="wait after a load before reading the server's RSS")
    parser.add_argument("--python-skip-nonref", action="store_true",
                        help="let the Python decoder drop unkept non-reference frames too")
    parser.add_argument("--python-only", action="store_true",
                        help="no server: the limit and the Python pipeline only")
    parser.add_argument("--quick", action="store_true",
                        help="a short trial: 1 round, 4 requests, concurrency 1,2")
    parser.add_argument("--precisions", default="bf16,int8",
                        help="backbone precisions (vidclf-server --precision) to run the batched "
                        "server in besides fp32, each a configuration of its own; a precision the "
                        "server refuses on this machine is left out and said why")
    parser.add_argument("--command", default="make bench-serving",
                        help="the command named in the report as the one that reproduces it")
    args = parser.parse_args(argv)

    if args.quick:
        args.rounds = 1
        args.requests_per_level = 4
        args.concurrency = "1,2"
        args.settle_seconds = min(args.settle_seconds, 2.0)
    levels = [int(c) for c in args.concurrency.split(",") if c.strip()]
    if not args.python_only and not (args.server_binary and args.client_binary):
        parser.error("--server-binary and --client-binary are needed (or --python-only)")
    started = time.time()
    os.makedirs(args.work_dir, exist_ok=True)

    # The model.
    repository = args.repository or os.path.join(args.work_dir, "model-repository")
    bundle = find_bundle(repository, args.model) if os.path.isdir(repository) else None
    if bundle is None:
        if args.repository:
            parser.error(f"no model bundle in --repository {args.repository}")
        if not args.train_binary:
            parser.error("no model repository: give --train-binary or --repository")
        log("training the demo model (about two minutes on two cores)")
        training = os.path.join(args.work_dir, "model-training")
        run([args.train_binary, "all", "--synthesize", "--data", os.path.join(training, "data"),
             "--work", os.path.join(training, "work"), "--run", "demo",
             "--output-repository", repository], stdout=subprocess.DEVNULL)
        bundle = find_bundle(repository, args.model)
    with open(os.path.join(bundle, "model.json"), encoding="utf-8") as f:
        config = json.load(f)
    head = config.get("head", {})
    model = {
        "name": config.get("name"),
        "version": config.get("version"),
        "head": head.get("type") if isinstance(head, dict) else head,
        "num_frames": config["input"].get("num_frames"),
        "resize_shorter_side": config["input"].get("resize_shorter_side"),
        "crop_size": config["input"].get("crop_size"),
    }
    if model["head"] != "gru":
        parser.error(f"the model's head is {model['head']}; the Python reference runs GRU heads")

    files = make_files(args.work_dir)
    infos = [probe(path) for path in files]
    single = next((p for p in files if os.path.basename(p) == SINGLE_FILE), files[0])
    facts = machine_facts()
    cores = facts["cores"]
    if facts["load_average_start"][0] > 0.25 * cores:
        log(f"warning: the load average is {facts['load_average_start'][0]:.2f} on {cores} "
            "cores; other work will skew the numbers (multi-threaded runs most)")
    limit = measure_limit(files, infos, config, cores, max(args.rounds, 3))
    log(f"limit: {limit['limit_sampled']:.2f} clips/s (sampled decode)")

    python_configs = [(1, cores), (cores, 1)] if cores > 1 else [(1, 1)]
    configs = [(f"Python {w}x{t}", "python", (w, t)) for w, t in python_configs]
    servers = {}
    refused = {}  # precision configurations the server would not start, and why
    memory = {}
    agreement = None
    server_banner = None
    try:
        if not args.python_only:
            precision_servers = [(f"vidclf batched {precision}", ["--precision", precision])
                                 for precision in args.precisions.split(",") if precision]
            for name, flags in (("vidclf batched", []),
                                ("vidclf unbatched", ["--max-batch-frames", "1"]),
                                *precision_servers):
                log(f"starting {name}")
                try:
                    server = Server(args.server_binary, repository, flags, name)
                except RuntimeError as error:
                    if name in ("vidclf batched", "vidclf unbatched"):
                        raise
                    refused[name] = str(error).strip().splitlines()[-1]
                    log(f"{name} left out: {refused[name]}")
                    continue
                servers[name] = server
                memory[name] = {"idle": server.metric("process_resident_memory_bytes"),
                                "after_load": []}
                answers = [classify_once(args.client_binary, server, path) for path in files]
                memory[name]["warm"] = server.metric("process_resident_memory_bytes")
                if name == "vidclf batched":
                    checks = python_check(bundle, files, cores)
                    same = 0
                    worst = 0.0
                    for answer, check in zip(answers, checks):
                        scores = {t["label"]: t["score"] for t in answer.get("top_k", [])}
                        same += answer["top_k"][0]["label"] == check["top"][0]["label"]
                        worst = max(worst, max(abs(p - scores.get(label, 0.0))
                                               for label, p in check["probabilities"].items()))
                    agreement = {"files": len(files), "same_top": same, "max_difference": worst}
            banner = servers["vidclf batched"]
            parts = []
            match = banner.banner(r"(LibTorch [^,]+), intra-op threads (\d+), BLAS (\S+)")
            if match:
                parts.append(f"{match.group(1)}, {match.group(2)} intra-op threads, BLAS "
                             f"{short_library(match.group(3))}")
            match = banner.banner(r"models run on (.*)")
            if match:
                parts.append(f"models run on {match.group(1).strip()}")
            server_banner = "; ".join(parts) or None
            configs = [("vidclf batched", "server", "vidclf batched"),
                       ("vidclf unbatched", "server", "vidclf unbatched"),
                       *[(name, "server", name) for name, _ in precision_servers
                         if name in servers],
                       *configs,
                       ("vidclf batched, single file", "single", "vidclf batched")]

        results = {name: [] for name, _, _ in configs}
        for round_index in range(args.rounds):
            shift = round_index % len(configs)
            for name, kind, detail in configs[shift:] + configs[:shift]:
                log(f"round {round_index + 1}/{args.rounds}: {name}")
                if kind == "python":
                    workers, threads = detail
                    run_levels = run_python_bench(bundle, files, levels,
                                                  args.requests_per_level, workers, threads,
                                                  args.python_skip_nonref)
                else:
                    server = servers[detail]
                    run_files = [single] if kind == "single" else files
                    run_levels = run_vidclf_bench(args.client_binary, server, run_files, levels,
                                                  args.requests_per_level)
                    time.sleep(args.settle_seconds)
                    if kind == "server":
                        memory[detail]["after_load"].append(
                            server.metric("process_resident_memory_bytes"))
                results[name].append(run_levels)
    finally:
        for server in servers.values():
            server.stop()

    tables = {name: aggregate(rounds, levels) for name, rounds in results.items()}
    python_best = {}
    python_best_latency = {}
    for c in levels:
        candidates = [(name, tables[name][c]) for name, kind, _ in configs
                      if kind == "python" and c in tables[name]]
        if candidates:
            name, row = max(candidates, key=lambda item: item[1]["clips_per_s"] or 0)
            python_best[c] = {**row, "config": name.replace("Python ", "")}
            name, row = min(candidates, key=lambda item: item[1]["p50_ms"] or float("inf"))
            python_best_latency[c] = {**row, "config": name.replace("Python ", "")}

    python_stages = {}
    for name, kind, _ in configs:
        if kind != "python":
            continue
        per_round = [lvl.get("stage_mean_ms") for run_levels in results[name]
                     for lvl in run_levels if lvl.get("concurrency") == levels[0]]
        per_round = [s for s in per_round if s]
        if per_round:
            python_stages[name.replace("Python ", "")] = {
                key: median([s.get(key) for s in per_round]) for key in per_round[0]}

    data = {
        "command": args.command,
        "python_stages": python_stages,
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "minutes": (time.time() - started) / 60,
        "quick": args.quick,
        "python_only": args.python_only,
        "rounds": args.rounds,
        "requests_label": (str(args.requests_per_level) if args.requests_per_level > 0
                           else "max(16, 8 x concurrency)"),
        "levels": levels,
        "settle_seconds": args.settle_seconds,
        "python_skip_nonref": args.python_skip_nonref,
        "machine": facts,
        "server_banner": server_banner,
        "model": model,
        "files": infos,
        "single_file": os.path.basename(single),
        "agreement": agreement,
        "limit": limit,
        "results": results,
        "tables": {name: table for name, table in tables.items()
                   if not name.startswith("Python")},
        "python_tables": {name: table for name, table in tables.items()
                          if name.startswith("Python")},
        "python_best": python_best,
        "python_best_latency": python_best_latency,
        "memory": memory or None,
        "precisions": [p for p in args.precisions.split(",") if p],
        "refused_precisions": refused,
    }
    data["targets"] = evaluate_targets(data)
    raw_path = os.path.join(args.work_dir, "serving-benchmark.json")
    with open(raw_path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, default=str)
    write_report(args.output, data)
    log(f"wrote {args.output} and {raw_path}")
    for target in data["targets"]:
        log(f"{target['what']}: {target['measured']} ({verdict(target['ok']).strip('*')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
