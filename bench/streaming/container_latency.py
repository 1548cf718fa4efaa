#!/usr/bin/python3
"""A lone real-time feed's update latency by the container it is sent in.

The same 25 fps H.264 frames, written as MPEG-TS (as FFmpeg and most cameras write it, without
the video PES packets' length), as MPEG-TS with that length, and as Matroska, are sent to one
vidclf-server by grpcio over StreamClassify: each frame's bytes (from its packet's position in
the file to the next packet's) at its time, the way a camera's muxer emits them. The server's
`latency_ms` runs from the arrival of a frame's bytes to its prediction, so whatever the demuxer
and parser hold a frame for shows up in it. The containers take turns, round after round.

Usage: container_latency.py --server-address HOST:PORT [--seconds 10] [--rounds 2]
"""
import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import tempfile
import time

import grpc

import run_benchmark

PROTO_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "proto")

# How each container is written from the same H.264 frames: ffmpeg output options.
CONTAINERS = {
    "MPEG-TS": ["-f", "mpegts"],
    "MPEG-TS, PES length written": ["-f", "mpegts", "-omit_video_pes_length", "0"],
    "Matroska": ["-f", "matroska"],
}


def classifier_messages(out_dir):
    """The generated video_classifier_pb2 module, imported by path (our 'grpc' package would
    shadow grpcio's)."""
    subprocess.run(["protoc", f"--proto_path={PROTO_DIR}", f"--python_out={out_dir}",
                    "vidclf/v1/video_classifier.proto"], check=True)
    path = os.path.join(out_dir, "vidclf", "v1", "video_classifier_pb2.py")
    spec = importlib.util.spec_from_file_location("video_classifier_pb2", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def frame_chunks(path):
    """The file's bytes cut at its video packets' positions: chunk k ends where packet k + 1
    begins (the first also holds the header, the last the trailer)."""
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v", "-show_entries",
                          "packet=pos", "-of", "csv=p=0", path],
                         check=True, capture_output=True, text=True).stdout
    starts = [int(line.split(",")[0]) for line in out.split()]
    with open(path, "rb") as file:
        data = file.read()
    cuts = starts[1:] + [len(data)]
    return [data[begin:end] for begin, end in zip([0] + cuts[:-1], cuts)]


def send_in_real_time(stub_call, messages, chunks, rate):
    """Runs one feed: chunk k at k / rate s after the first. Returns its predictions."""
    def requests():
        yield messages.StreamClassifyRequest(
            config=messages.StreamConfig(input=messages.StreamConfig.CONTAINER))
        start = time.monotonic()
        for index, chunk in enumerate(chunks):
            delay = start + index / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            yield messages.StreamClassifyRequest(chunk=chunk)
    return list(stub_call(requests(), timeout=600))


def measure(address, source, seconds, rounds, work):
    """{container: [p50 update ms of each round]} for the first `seconds` of the 25 fps `source`,
    over the updates after the first second."""
    messages = classifier_messages(work)
    chunks = {}
    for name, options in CONTAINERS.items():
        path = os.path.join(work, f"camera-{len(chunks)}")
        subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-i", source, "-t",
                        str(seconds), "-c", "copy", *options, path], check=True)
        chunks[name] = frame_chunks(path)
    channel = grpc.insecure_channel(address)
    call = channel.stream_stream(
        "/vidclf.v1.VideoClassifier/StreamClassify",
        request_serializer=messages.StreamClassifyRequest.SerializeToString,
        response_deserializer=messages.StreamPrediction.FromString)
    p50s = {name: [] for name in CONTAINERS}
    for _ in range(rounds):
        for name in CONTAINERS:
            predictions = send_in_real_time(call, messages, chunks[name], 25)
            steady = [p.latency_ms for p in predictions if p.last_seconds >= 1.0]
            p50s[name].append(statistics.median(steady))
    channel.close()
    return p50s


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-address", required=True)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vidclf-containers-") as work:
        source = os.path.join(work, "camera.mp4")
        run_benchmark.make_feed(source, args.seconds)
        print(json.dumps(measure(args.server_address, source, args.seconds, args.rounds, work)))


if __name__ == "__main__":
    main()
