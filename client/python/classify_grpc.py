#!/usr/bin/python3
"""Classifies a video file with vidclf.v1's Classify over gRPC, with Debian's python3-grpcio and
the stubs the build generates from proto/ (build/python/).

    PYTHONPATH=build/python /usr/bin/python3 client/python/classify_grpc.py build/samples/fade_in.mp4
"""
import argparse
import os

import grpc
from vidclf.v1 import video_classifier_pb2 as vidclf
from vidclf.v1 import video_classifier_pb2_grpc as vidclf_grpc


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("video")
    parser.add_argument("--server", default=os.environ.get("VIDCLF_SERVER", "localhost:50051"),
                        help="host:port (default: $VIDCLF_SERVER, as for the vidclf client)")
    parser.add_argument("--top-k", type=int, default=3)
    args = parser.parse_args()
    try:
        with open(args.video, "rb") as video, grpc.insecure_channel(args.server) as channel:
            stub = vidclf_grpc.VideoClassifierStub(channel)
            response = stub.Classify(vidclf.ClassifyRequest(video=video.read(), top_k=args.top_k),
                                     timeout=60)
    except OSError as error:
        raise SystemExit(f"{args.video}: {error.strerror}")
    except grpc.RpcError as error:
        # One line, as the REST example's: the status code and the server's message.
        raise SystemExit(f"gRPC {error.code().name}: {error.details()}")
    print(f"{response.model} {response.model_version}: {response.frames_used} frames")
    for entry in response.top_k:
        print(f"{entry.label:24} {entry.score:.4f}")


if __name__ == "__main__":
    main()
