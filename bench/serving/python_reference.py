#!/usr/bin/env python3
"""A careful Python pipeline doing the same work as vidclf-server, for docs/serving-benchmark.md.

For one video it does what the server does for a Classify call with the default (uniform)
sampling:

1. demuxes the video stream once, keeping its packets, and numbers the frames by presentation
   timestamp (the server's frame table: every packet of the stream is a frame);
2. picks the model's `input.num_frames` frames as media/frame_sampler.cc does for "uniform":
   index floor((i + 0.5) * total / n) for i < n, or every frame when the video has no more;
3. decodes the packets in order (PyAV, libavcodec with frame and slice threads), converting only
   the kept frames and stopping once the last one is out; optionally (--skip-nonref) the decoder
   drops the non-reference frames that are not kept, and (--seek) jumps to the keyframe before the
   next kept frame when it lies ahead, as the server does;
4. resizes the shorter side to `input.resize_shorter_side` (bilinear; swscale through PyAV by
   default, or torch's antialiased bilinear interpolation with --resize torch), crops the centre
   square of `input.crop_size`, normalises with `input.mean`/`input.std`;
5. embeds the frames with torchvision's ResNet18 (fc removed: the 512-d average-pooled features,
   as model/resnet18.cc returns) and runs the GRU head, then a softmax.

Only GRU-head bundles are supported (the head of the demo model); a transformer bundle is refused
with a message. Display rotation is not applied (the server applies it); non-square pixels are
stretched to the display aspect ratio as the server does.

The bundle's backbone.pt and head.pt are LibTorch module archives (torch::save of a module); the
Python side reads them with torch.jit.load and copies their named parameters and buffers.

Modes:
  --check FILE...   per file: the top labels and all probabilities, as JSON (one object).
  --bench FILE...   R requests over the files, round-robin, with N concurrent requesters (a closed
                    loop: a requester sends its next request when its answer arrives), served by W
                    worker processes of T torch threads each; each worker loads the model once and
                    classifies one clip before timing starts. Prints JSON. With several
                    concurrencies (--concurrency 1,2,4) the same workers run each level in turn and
                    the JSON has one entry per level under "levels".

Examples:
  python3 bench/serving/python_reference.py --model-dir REPO/demo/1 --check a.mp4 b.mp4
  python3 bench/serving/python_reference.py --model-dir REPO/demo/1 --bench a.mp4 b.mp4 \\
      --concurrency 8 --requests 64 --workers 2 --threads 1

Needs python3-av, python3-torch and python3-torchvision (Debian packages).
"""

import argparse
import bisect
import concurrent.futures
import json
import math
import multiprocessing
import os
import statistics
import sys
import threading
import time

import numpy as np
import torch
import torchvision

# PyAV is needed only to decode; importing it lazily lets the helpers below (FLOP counting) run
# without it.
av = None


def _import_av():
    global av
    if av is None:
        import av as av_module  # noqa: PLC0415

        av = av_module
    return av


# ---------------------------------------------------------------------------------------------
# The model bundle
# ---------------------------------------------------------------------------------------------


class GruHead(torch.nn.Module):
    """model/heads/gru_head.cc: standardise the embeddings with the bundle's buffers, a stacked
    batch-first GRU, the output at each sequence's last valid frame, Linear -> ReLU -> Linear."""

    def __init__(self, num_classes, input_size=512, hidden_size=32, num_layers=2,
                 mlp_hidden_size=16):
        super().__init__()
        self.register_buffer("embedding_mean", torch.zeros(input_size))
        self.register_buffer("embedding_std", torch.ones(input_size))
        self.gru = torch.nn.GRU(input_size, hidden_size, num_layers=num_layers, batch_first=True)
        self.fc1 = torch.nn.Linear(hidden_size, mlp_hidden_size)
        self.fc2 = torch.nn.Linear(mlp_hidden_size, num_classes)

    def forward(self, embeddings, lengths):
        x = (embeddings - self.embedding_mean) / self.embedding_std
        outputs, _ = self.gru(x)  # [B, T, hidden]
        last = (lengths.to(torch.long) - 1).view(-1, 1, 1).expand(-1, 1, outputs.size(2))
        final_state = outputs.gather(1, last).squeeze(1)
        return self.fc2(torch.relu(self.fc1(final_state)))


def _archive_state(path):
    """Named parameters and buffers of a module written by LibTorch's torch::save."""
    module = torch.jit.load(path, map_location="cpu")
    state = {name: tensor.detach().clone() for name, tensor in module.named_parameters()}
    state.update({name: tensor.detach().clone() for name, tensor in module.named_buffers()})
    return state


def make_backbone(state=None):
    """torchvision's ResNet18 whose forward returns the 512-d pooled features (fc not applied)."""
    model = torchvision.models.resnet18()
    if state is not None:
        model.load_state_dict(state, strict=True)
    model.fc = torch.nn.Identity()
    return model.eval()


class Bundle:
    """A vidclf model bundle REPO/<name>/<version>/ loaded into PyTorch modules."""

    def __init__(self, directory, channels_last=True):
        with open(os.path.join(directory, "model.json"), encoding="utf-8") as f:
            self.config = json.load(f)
        config = self.config
        if config.get("backbone", "resnet18") != "resnet18":
            raise SystemExit(f"unsupported backbone {config.get('backbone')!r}: only resnet18")
        head = config.get("head", {})
        head_type = head.get("type") if isinstance(head, dict) else head
        if head_type != "gru":
            raise SystemExit(
                f"{directory}: head type {head_type!r} is not supported by this reference "
                "pipeline; only GRU heads are (train one with vidclf-train --head gru)")
        self.name = config.get("name", "")
        self.version = str(config.get("version", ""))
        self.labels = list(config["labels"])
        inp = config.get("input", {})
        self.num_frames = int(inp.get("num_frames", 16))
        self.resize_shorter_side = int(inp.get("resize_shorter_side", 256))
        self.crop_size = int(inp.get("crop_size", 224))
        self.mean = [float(v) for v in inp.get("mean", [0.485, 0.456, 0.406])]
        self.std = [float(v) for v in inp.get("std", [0.229, 0.224, 0.225])]
        if not 0 < self.crop_size <= self.resize_shorter_side:
            raise SystemExit("model.json: need 0 < crop_size <= resize_shorter_side")

        self.backbone = make_backbone(_archive_state(os.path.join(directory, "backbone.pt")))
        self.channels_last = channels_last
        if channels_last:
            self.backbone = self.backbone.to(memory_format=torch.channels_last)
        head_state = _archive_state(os.path.join(directory, "head.pt"))
        self.head = GruHead(
            num_classes=len(self.labels),
            input_size=int(head_state["embedding_mean"].numel()),
            hidden_size=int(head.get("hidden_size", 32)),
            num_layers=int(head.get("num_layers", 2)),
            mlp_hidden_size=int(head.get("mlp_hidden_size", 16)),
        )
        self.head.load_state_dict(head_state, strict=True)
        self.head.eval()
        # (value / 255 - mean) / std == value * scale + offset, per RGB channel.
        self.scale = torch.tensor([1.0 / (255.0 * s) for s in self.std], dtype=torch.float32)
        self.offset = torch.tensor([-m / s for m, s in zip(self.mean, self.std)],
                                   dtype=torch.float32)

    def classify_frames(self, frames_nhwc):
        """frames_nhwc: uint8 [T, crop, crop, 3]. Returns (probabilities [classes], embed s,
        head s)."""
        with torch.inference_mode():
            x = torch.from_numpy(frames_nhwc).float()
            x = x * self.scale + self.offset  # still [T, H, W, 3]
            # A permuted view of NHWC memory is a channels-last NCHW tensor: no copy.
            x = x.permute(0, 3, 1, 2)
            if not self.channels_last:
                x = x.contiguous()
            start = time.perf_counter()
            embeddings = self.backbone(x)  # [T, 512]
            embedded = time.perf_counter()
            lengths = torch.tensor([embeddings.size(0)], dtype=torch.long)
            logits = self.head(embeddings.unsqueeze(0), lengths)
            probabilities = torch.softmax(logits, dim=-1)[0]
            done = time.perf_counter()
        return probabilities.numpy().astype(float), embedded - start, done - embedded


# ---------------------------------------------------------------------------------------------
# Decoding and preprocessing
# ---------------------------------------------------------------------------------------------


def uniform_sample_indices(total_frames, num_samples):
    """media/frame_sampler.cc UniformSampleIndices: floor((i + 0.5) * total / n)."""
    if total_frames <= 0:
        return []
    if num_samples <= 0 or num_samples >= total_frames:
        return list(range(total_frames))
    return [((2 * i + 1) * total_frames) // (2 * num_samples) for i in range(num_samples)]


def resized_size(width, height, shorter):
    """Shorter side to `shorter`, the other rounded to nearest (media/frame_converter.cc)."""
    if width < height:
        return shorter, int(math.floor(height * shorter / width + 0.5))
    return int(math.floor(width * shorter / height + 0.5)), shorter


class Preprocessor:
    """Shorter-side resize, centre crop, RGB. Normalisation happens in Bundle.classify_frames
    on the whole stack of frames at once."""

    def __init__(self, shorter, crop, method="swscale"):
        if method not in ("swscale", "torch"):
            raise ValueError(f"unknown resize method {method!r}")
        self.shorter = shorter
        self.crop = crop
        self.method = method

    def __call__(self, frame, sample_aspect_ratio):
        display_width = frame.width
        if sample_aspect_ratio:
            display_width = frame.width * float(sample_aspect_ratio)
        scaled_w, scaled_h = resized_size(display_width, frame.height, self.shorter)
        left = (scaled_w - self.crop) // 2
        top = (scaled_h - self.crop) // 2
        if self.method == "swscale":
            rgb = frame.to_ndarray(width=scaled_w, height=scaled_h, format="rgb24",
                                   interpolation="BILINEAR")
            return rgb[top:top + self.crop, left:left + self.crop]
        # torchvision-style: full-resolution RGB, antialiased bilinear resize in torch.
        rgb = torch.from_numpy(frame.to_ndarray(format="rgb24"))
        image = rgb.permute(2, 0, 1).unsqueeze(0).float()
        resized = torch.nn.functional.interpolate(image, size=(scaled_h, scaled_w),
                                                  mode="bilinear", align_corners=False,
                                                  antialias=True)
        cropped = resized[0, :, top:top + self.crop, left:left + self.crop]
        return cropped.round_().clamp_(0, 255).to(torch.uint8).permute(1, 2, 0).numpy()


def decode_sampled(source, num_frames, preprocess, decoder_threads=0, skip_nonref=False,
                   seek=False):
    """Decodes the uniformly sampled frames of `source` (a path or file object).

    With `seek`, jumps to the keyframe before the next wanted frame when that keyframe lies past
    every packet sent so far, as media/sampled_decode.cc does.

    Returns (frames uint8 [T, crop, crop, 3], info dict).
    """
    _import_av()
    timings = {}
    start = time.perf_counter()
    container = av.open(source)
    try:
        stream = container.streams.video[0]
        # Frame and slice threads; 0 lets libavcodec pick (one per core).
        stream.thread_type = "AUTO"
        stream.thread_count = decoder_threads
        ctx = stream.codec_context

        # One demux pass: every packet of the stream is a frame (the server's frame table).
        packets = [packet for packet in container.demux(stream) if packet.size > 0]
        total = len(packets)
        pts = [packet.pts for packet in packets]
        by_timestamp = all(p is not None for p in pts) and len(set(pts)) == total
        index_of = {}
        keyframes = []
        if by_timestamp:
            ordered = sorted(pts)
            index_of = {p: i for i, p in enumerate(ordered)}
            position_of = {p: i for i, p in enumerate(pts)}  # in decoding order
            keyframes = sorted(index_of[packet.pts] for packet in packets if packet.is_keyframe)
        wanted = uniform_sample_indices(total, num_frames)
        wanted_set = set(wanted)
        sar = ctx.sample_aspect_ratio if hasattr(ctx, "sample_aspect_ratio") else None
        time_base = stream.time_base
        origin = stream.start_time if stream.start_time is not None else 0
        timings["demux_s"] = time.perf_counter() - start

        kept = []
        kept_indices = []
        kept_times = []
        decoded = 0
        convert_s = 0.0
        next_wanted = 0

        def take(frame):
            nonlocal decoded, next_wanted, convert_s
            if by_timestamp:
                stamp = frame.pts if frame.pts is not None else frame.dts
                index = index_of.get(stamp, -1)
            else:
                index = decoded
            decoded += 1
            if next_wanted >= len(wanted) or index != wanted[next_wanted]:
                return
            next_wanted += 1
            t0 = time.perf_counter()
            kept.append(preprocess(frame, sar))
            convert_s += time.perf_counter() - t0
            kept_indices.append(index)
            if by_timestamp:
                kept_times.append(float((frame.pts - origin) * time_base))
            else:
                rate = stream.average_rate or 25
                kept_times.append(index / float(rate))

        position = 0
        highest_sent = -1
        while position < total and next_wanted < len(wanted):
            if seek and keyframes:
                after = bisect.bisect_right(keyframes, wanted[next_wanted])
                if after > 0 and keyframes[after - 1] > highest_sent + 1:
                    keyframe = keyframes[after - 1]
                    # PyAV 10's codec context has no flush of its own; seeking the container
                    # flushes its decoders. The packets are already in memory.
                    container.seek(ordered[keyframe], stream=stream, backward=True)
                    position = position_of[ordered[keyframe]]
                    highest_sent = keyframe - 1
            packet = packets[position]
            position += 1
            if by_timestamp:
                highest_sent = max(highest_sent, index_of[packet.pts])
            if skip_nonref and by_timestamp:
                # Read by the decoder when this packet is sent.
                ctx.skip_frame = "DEFAULT" if index_of.get(packet.pts) in wanted_set else "NONREF"
            for frame in ctx.decode(packet):
                take(frame)
        if next_wanted < len(wanted):
            for frame in ctx.decode(None):
                take(frame)
    finally:
        container.close()
    timings["decode_s"] = time.perf_counter() - start - convert_s
    timings["preprocess_s"] = convert_s
    if not kept:
        raise ValueError("no frames decoded")
    info = {
        "total_frames": total,
        "frames_decoded": decoded,
        "frame_indices": kept_indices,
        "timestamps_seconds": kept_times,
        **timings,
    }
    return np.stack(kept), info


# ---------------------------------------------------------------------------------------------
# One request
# ---------------------------------------------------------------------------------------------


class Classifier:
    def __init__(self, model_dir, torch_threads=None, decoder_threads=None, resize="swscale",
                 skip_nonref=False, channels_last=True, seek=False):
        if torch_threads:
            torch.set_num_threads(torch_threads)
        self.bundle = Bundle(model_dir, channels_last=channels_last)
        self.preprocess = Preprocessor(self.bundle.resize_shorter_side, self.bundle.crop_size,
                                       resize)
        # Decoder threads: as many as the torch threads unless given (0: libavcodec's choice).
        self.decoder_threads = (decoder_threads if decoder_threads is not None
                                else (torch_threads or 0))
        self.skip_nonref = skip_nonref
        self.seek = seek

    def classify(self, path):
        start = time.perf_counter()
        frames, info = decode_sampled(path, self.bundle.num_frames, self.preprocess,
                                      self.decoder_threads, self.skip_nonref, self.seek)
        probabilities, embed_s, head_s = self.bundle.classify_frames(frames)
        info["embed_s"] = embed_s
        info["head_s"] = head_s
        info["total_s"] = time.perf_counter() - start
        return probabilities, info


def _result(bundle, path, probabilities, info, top_k):
    order = np.argsort(-probabilities, kind="stable")
    return {
        "file": path,
        "model": bundle.name,
        "version": bundle.version,
        "top": [{"label": bundle.labels[i], "score": float(probabilities[i])}
                for i in order[:top_k]],
        "probabilities": {label: float(p) for label, p in zip(bundle.labels, probabilities)},
        "frames": len(info["frame_indices"]),
        "total_frames": info["total_frames"],
        "frames_decoded": info["frames_decoded"],
        "frame_indices": info["frame_indices"],
        "timestamps_seconds": [round(t, 6) for t in info["timestamps_seconds"]],
        "timings_ms": {k[:-2]: round(v * 1e3, 3) for k, v in info.items() if k.endswith("_s")},
    }


# ---------------------------------------------------------------------------------------------
# Benchmark workers
# ---------------------------------------------------------------------------------------------

_worker = None


def _worker_init(model_dir, threads, decoder_threads, resize, skip_nonref, channels_last,
                 warm_file, seek=False):
    global _worker
    # One torch thread pool per worker, no extra inter-op threads.
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    _worker = Classifier(model_dir, torch_threads=threads, decoder_threads=decoder_threads,
                         resize=resize, skip_nonref=skip_nonref, channels_last=channels_last,
                         seek=seek)
    if warm_file:
        _worker.classify(warm_file)


def _worker_classify(path):
    probabilities, info = _worker.classify(path)
    return int(np.argmax(probabilities)), {k: v for k, v in info.items() if k.endswith("_s")}


def _worker_ready(_):
    time.sleep(0.2)
    return os.getpid()


def percentile(values, q):
    """Percentile q (0 to 100) of a non-empty list, interpolating linearly between the two
    nearest ranks (the method `vidclf bench` uses, so that the two are read alike)."""
    ordered = sorted(values)
    rank = q / 100.0 * (len(ordered) - 1)
    low = int(math.floor(rank))
    high = min(len(ordered) - 1, low + 1)
    return ordered[low] + (rank - low) * (ordered[high] - ordered[low])


def requests_for(concurrency, requests):
    """Requests per level: `requests`, or when it is 0 the rule of `vidclf bench` (8 per
    concurrency, at least 16)."""
    return requests if requests > 0 else max(16, 8 * concurrency)


def run_level(executor, files, concurrency, requests):
    """Closed loop: `concurrency` requesters, `requests` in all, files round-robin."""
    lock = threading.Lock()
    done_event = threading.Event()
    latencies = []
    stages = []
    errors = []
    state = {"sent": 0, "finished": 0}

    def send():
        # Called with the lock held.
        index = state["sent"]
        state["sent"] += 1
        path = files[index % len(files)]
        submitted = time.perf_counter()
        future = executor.submit(_worker_classify, path)
        future.add_done_callback(lambda f, t=submitted: finished(f, t))

    def finished(future, submitted):
        elapsed = time.perf_counter() - submitted
        with lock:
            try:
                _, info = future.result()
                latencies.append(elapsed * 1e3)
                stages.append(info)
            except Exception as error:  # noqa: BLE001 - counted and reported
                errors.append(repr(error))
            state["finished"] += 1
            if state["sent"] < requests:
                send()
            elif state["finished"] >= requests:
                done_event.set()

    start = time.perf_counter()
    with lock:
        for _ in range(min(concurrency, requests)):
            send()
    done_event.wait()
    seconds = time.perf_counter() - start
    level = {
        "concurrency": concurrency,
        "requests": requests,
        "errors": len(errors),
        "seconds": seconds,
        "clips_per_s": len(latencies) / seconds if seconds > 0 else 0.0,
        "p50_ms": percentile(latencies, 50) if latencies else None,
        "p95_ms": percentile(latencies, 95) if latencies else None,
        "p99_ms": percentile(latencies, 99) if latencies else None,
        "latencies_ms": [round(v, 3) for v in latencies],
    }
    if stages:
        level["stage_mean_ms"] = {
            key[:-2]: round(statistics.fmean(s[key] for s in stages) * 1e3, 3)
            for key in stages[0]
        }
    if errors:
        level["error_messages"] = sorted(set(errors))[:5]
    return level


def bench(args):
    concurrencies = [int(c) for c in str(args.concurrency).split(",") if c.strip()]
    if not concurrencies or min(concurrencies) < 1:
        raise SystemExit("--concurrency needs positive integers")
    files = [os.path.abspath(f) for f in args.bench]
    # Each worker's OpenMP pool gets --threads threads (read when torch loads in the spawned
    # worker), so that W workers of T threads use W * T cores. OpenBLAS runs only the head's small
    # matrix products (torch's convolutions are oneDNN's), and its pool's workers spin on
    # sched_yield after each, on cores decoding needs: one thread, as vidclf-server sets it.
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    # Spawned workers: forking a process whose OpenMP pool has started can hang.
    context = multiprocessing.get_context("spawn")
    executor = concurrent.futures.ProcessPoolExecutor(
        max_workers=args.workers, mp_context=context, initializer=_worker_init,
        initargs=(args.model_dir, args.threads, args.decoder_threads, args.resize,
                  args.skip_nonref, not args.nchw, files[0], args.seek))
    try:
        # Start every worker (each loads the model and classifies one clip) before timing: a
        # task runs only in a worker whose initializer has finished.
        ready = set()
        while len(ready) < args.workers:
            ready.update(executor.map(_worker_ready, range(args.workers)))
        results = []
        for concurrency in concurrencies:
            results.append(run_level(executor, files, concurrency,
                                     requests_for(concurrency, args.requests)))
    finally:
        executor.shutdown(wait=True)
    settings = {
        "workers": args.workers,
        "threads": args.threads,
        "decoder_threads": (args.decoder_threads if args.decoder_threads is not None
                            else args.threads),
        "resize": args.resize,
        "skip_nonref": args.skip_nonref,
        "seek": args.seek,
        "memory_format": "nchw" if args.nchw else "channels-last",
        "files": files,
    }
    if len(results) == 1:
        return {**results[0], **settings}
    return {"levels": results, **settings}


# ---------------------------------------------------------------------------------------------
# Helpers for the harness
# ---------------------------------------------------------------------------------------------


def backbone_macs(crop_size):
    """Multiply-accumulates of the ResNet18 backbone (no fc) for one crop_size^2 frame, counted
    from the convolutions' output shapes (batch norms, ReLUs, pooling and additions excluded)."""
    model = make_backbone()
    total = [0]

    def hook(module, _inputs, output):
        kernel = module.kernel_size[0] * module.kernel_size[1]
        total[0] += output.numel() * kernel * module.in_channels // module.groups

    handles = [m.register_forward_hook(hook) for m in model.modules()
               if isinstance(m, torch.nn.Conv2d)]
    with torch.inference_mode():
        model(torch.zeros(1, 3, crop_size, crop_size))
    for handle in handles:
        handle.remove()
    return total[0]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-dir", required=True,
                        help="a bundle directory REPO/<name>/<version>/")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", nargs="+", metavar="FILE", help="classify and print JSON")
    mode.add_argument("--bench", nargs="+", metavar="FILE", help="run the load benchmark")
    parser.add_argument("--top-k", type=int, default=4)
    parser.add_argument("--concurrency", default="1",
                        help="concurrent requesters; a comma list runs one level each")
    parser.add_argument("--requests", type=int, default=0,
                        help="requests per level (0: 8 per concurrency, at least 16)")
    parser.add_argument("--workers", type=int, default=1, help="worker processes")
    parser.add_argument("--threads", type=int, default=max(1, os.cpu_count() or 1),
                        help="torch threads per worker (default: the machine's cores)")
    parser.add_argument("--decoder-threads", type=int, default=None,
                        help="libavcodec threads per decode (default: --threads; 0: auto)")
    parser.add_argument("--resize", choices=["swscale", "torch"], default="swscale",
                        help="swscale bilinear via PyAV (default) or torch antialiased bilinear")
    parser.add_argument("--skip-nonref", action="store_true",
                        help="let the decoder drop non-reference frames that are not kept")
    parser.add_argument("--seek", action="store_true",
                        help="jump to the keyframe before the next kept frame when it lies ahead")
    parser.add_argument("--nchw", action="store_true",
                        help="run the backbone in NCHW instead of channels-last")
    args = parser.parse_args(argv)

    if args.check:
        classifier = Classifier(args.model_dir, torch_threads=args.threads,
                                decoder_threads=args.decoder_threads, resize=args.resize,
                                skip_nonref=args.skip_nonref, channels_last=not args.nchw,
                                seek=args.seek)
        results = []
        for path in args.check:
            probabilities, info = classifier.classify(path)
            results.append(_result(classifier.bundle, path, probabilities, info, args.top_k))
        json.dump({"results": results}, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    json.dump(bench(args), sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
