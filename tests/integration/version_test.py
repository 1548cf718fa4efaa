#!/usr/bin/python3
"""`--version` on every executable: its name, the project's version and commit, and the
libraries it runs on, the FFmpeg and gRPC versions being those the process loaded (checked
against the ffmpeg command's and Python grpcio's, Debian's same builds), and the server's heap,
jemalloc.
Usage: version_test.py SERVER CLIENT TRAIN"""
import re
import subprocess
import sys
import unittest

import grpc

BINARIES = {}


def version_of(binary):
    result = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise AssertionError(f"{binary} --version exited {result.returncode}: {result.stderr}")
    lines = result.stdout.strip().splitlines()
    return lines[0], dict(line.split(" ", 1) for line in lines[1:])


class VersionTest(unittest.TestCase):
    def test_every_executable_says_its_version_and_libraries(self):
        ffmpeg = re.match(r"ffmpeg version (\S+)", subprocess.run(
            ["ffmpeg", "-version"], capture_output=True, text=True, check=True).stdout).group(1)
        expected = {"vidclf-server": {"LibTorch", "FFmpeg", "gRPC", "heap"},
                    "vidclf": {"FFmpeg", "gRPC"}, "vidclf-train": {"LibTorch", "FFmpeg"}}
        for name, binary in BINARIES.items():
            with self.subTest(name=name):
                first, libraries = version_of(binary)
                self.assertRegex(first, rf"^{re.escape(name)} \d+\.\d+\.\d+ "
                                        r"\(commit ([0-9a-f]{7,40}|unknown)\)$")
                self.assertEqual(set(libraries), expected[name])
                self.assertEqual(libraries["FFmpeg"], ffmpeg)
                if "gRPC" in libraries:
                    self.assertEqual(libraries["gRPC"], grpc.__version__)
                if "heap" in libraries:  # the default build's allocator (server/heap.h)
                    self.assertRegex(libraries["heap"], r"^jemalloc \d+\.\d+\.\d+")
                if "LibTorch" in libraries:
                    self.assertRegex(libraries["LibTorch"], r"^\d+\.\d+\.\d+")


if __name__ == "__main__":
    BINARIES.update(zip(("vidclf-server", "vidclf", "vidclf-train"), sys.argv[1:4]))
    unittest.main(argv=sys.argv[:1] + sys.argv[4:])
