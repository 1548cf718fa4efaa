#!/usr/bin/python3
"""A live source that drops, to try `vidclf watch` on: serves FILE over HTTP on loopback, each
connection getting the next of --pieces equal pieces of it before the connection is closed, and
stops listening once every piece has been sent, as a camera that goes away would.

    python3 scripts/dropping-source.py camera.ts --port 18081 --pieces 2
"""
import argparse
import http.server
import os


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--port", type=int, default=18081)
    parser.add_argument("--pieces", type=int, default=2)
    args = parser.parse_args()
    with open(args.file, "rb") as source:
        data = source.read()
    size = -(-len(data) // args.pieces)
    pieces = [data[start:start + size] for start in range(0, len(data), size)]
    content_type = "video/mp2t" if args.file.endswith(".ts") else "application/octet-stream"

    class Piece(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(pieces.pop(0))

        def log_message(self, *_):
            pass

    with http.server.HTTPServer(("127.0.0.1", args.port), Piece) as server:
        print(f"serving {os.path.basename(args.file)} in {len(pieces)} pieces on "
              f"http://127.0.0.1:{args.port}/{os.path.basename(args.file)}", flush=True)
        while pieces:
            server.handle_request()


if __name__ == "__main__":
    main()
