#!/usr/bin/python3
"""Classifies a video file through the HTTP door (--http-port) with the standard library alone:
the file's bytes in the body of POST /v2/models/NAME/classify, JSON back.

    /usr/bin/python3 client/python/classify_rest.py build/samples/fade_in.mp4
"""
import argparse
import json
import os
import urllib.error
import urllib.request


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("video")
    parser.add_argument("--url", default=os.environ.get("VIDCLF_HTTP_URL", "http://localhost:8000"),
                        help="the HTTP door (default: $VIDCLF_HTTP_URL)")
    parser.add_argument("--model", default="demo")
    parser.add_argument("--top-k", type=int, default=3)
    args = parser.parse_args()
    try:
        with open(args.video, "rb") as video:
            request = urllib.request.Request(
                f"{args.url}/v2/models/{args.model}/classify?top_k={args.top_k}",
                data=video.read(), headers={"Content-Type": "application/octet-stream"})
        with urllib.request.urlopen(request, timeout=60) as reply:
            answer = json.load(reply)
    except urllib.error.HTTPError as error:
        # The server's error is JSON too: {"error": "..."}.
        raise SystemExit(f"HTTP {error.code}: {json.load(error).get('error')}")
    except urllib.error.URLError as error:
        raise SystemExit(f"cannot reach {args.url}: {error.reason}")
    except OSError as error:
        raise SystemExit(f"{args.video}: {error.strerror}")
    print(f"{answer['model']} {answer['model_version']}: {answer['frames_used']} frames")
    for entry in answer["top_k"]:
        print(f"{entry['label']:24} {entry['score']:.4f}")


if __name__ == "__main__":
    main()
