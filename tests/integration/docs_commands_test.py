#!/usr/bin/python3
"""The commands of the README and the documentation's pages run as written.

A fenced block right after the line `<!-- runnable -->` is run: in a `console` block each line
that starts with `$ ` is a command (a trailing backslash continues it) and the lines up to the
next one are its shown output; in an `sh` block every line is a command. The commands of a page
run in order, in one working directory of its own that holds `build` (the executables, the demo
models and samples, the Python stubs) and the source tree's folders, against one server started
as `make serve` starts it, on free ports. The ports 50051, 8000 and 9464, and those of second
servers and sources (50052, 50053, 8002, 18081), after `localhost:`, `127.0.0.1:` or a `-port`
flag in a command or its output are rewritten to free ones; the clients find the server through
VIDCLF_SERVER and VIDCLF_HTTP_URL. A command ending in `&` is left running until its page is
done. A block marked `<!-- runnable; the last command exits N -->` shows a failure: its last
command must exit with N.

A command fails the test when it exits with another status than that, 0 by default, or when a
line of its shown output has no line like it in what it printed: alike when equal once every
number, commit and label of the demo models is masked and `...` stands for anything (timings,
scores and which label wins change from machine to machine; the shape of the output does not).

Usage: docs_commands_test.py SOURCE_DIR BIN_DIR PYTHON_STUBS DEMO_DIR
(DEMO_DIR holding repo/ and samples/, as the demo_model test leaves them)"""
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import server_fixture

SOURCE = BIN = STUBS = DEMO = None
MARKER = "<!-- runnable -->"
# Or "<!-- runnable; the last command exits 1 -->", for an example that shows a failure.
MARKER_PATTERN = re.compile(r"<!-- runnable(?:; the last command exits (\d+))? -->$")
COMMAND_TIMEOUT_S = 300
NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
COMMIT = re.compile(r"\bcommit [0-9a-f]{7,40}\b")


class Command:
    def __init__(self, page, line, text):
        self.page, self.line, self.text = page, line, text
        self.shown = []  # output lines
        self.exit_status = 0

    def where(self):
        return f"{self.page}:{self.line}: {self.text}"


def runnable_commands(path):
    """The commands of the runnable blocks of the page at `path`, in order."""
    commands = []
    with open(path) as page:
        lines = page.read().splitlines()
    name = os.path.relpath(path, SOURCE)
    index = 0
    while index < len(lines):
        marker = MARKER_PATTERN.match(lines[index].strip())
        if not marker:
            index += 1
            continue
        block_start = len(commands)
        fence = lines[index + 1].strip()
        if not fence.startswith("```"):
            raise ValueError(f"{name}:{index + 1}: {MARKER} must come right before a fence")
        console = fence[3:].strip() == "console"
        index += 2
        pending = None  # a command continued by a trailing backslash
        while not lines[index].strip().startswith("```"):
            text, number = lines[index], index + 1
            index += 1
            if pending is not None:
                pending.text += "\n" + text
                if not text.endswith("\\"):
                    pending = None
                continue
            if console and not text.startswith("$ "):
                if commands and text.strip():
                    commands[-1].shown.append(text)
                continue
            text = text[2:] if console else text
            if not text.strip() or text.lstrip().startswith("#"):
                continue
            commands.append(Command(name, number, text))
            if text.endswith("\\"):
                pending = commands[-1]
        index += 1
        if marker.group(1) and len(commands) > block_start:
            commands[-1].exit_status = int(marker.group(1))
    return commands


def shape(line, labels):
    """A line with its numbers and labels masked, spaces collapsed."""
    line = re.sub(r"\b(" + "|".join(map(re.escape, labels)) + r")\b", "LABEL", line)
    return " ".join(NUMBER.sub("N", COMMIT.sub("commit C", line)).split())


def missing_lines(shown, printed, labels):
    """The shown lines that have no line like them in `printed`."""
    printed_shapes = [shape(line, labels) for line in printed.splitlines()]
    missing = []
    for line in shown:
        pattern = re.compile(".*".join(map(re.escape, shape(line, labels).split("..."))) + "$")
        if not any(pattern.match(candidate) for candidate in printed_shapes):
            missing.append(line)
    return missing


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Page:
    """A page's working directory and the processes its commands left running."""

    def __init__(self, ports):
        self.directory = tempfile.mkdtemp(prefix="docs-commands-")
        build = os.path.join(self.directory, "build")
        os.mkdir(build)
        os.symlink(BIN, os.path.join(build, "bin"))
        os.symlink(STUBS, os.path.join(build, "python"))
        os.symlink(os.path.join(DEMO, "repo"), os.path.join(build, "model-repository"))
        os.symlink(os.path.join(DEMO, "samples"), os.path.join(build, "samples"))
        for folder in ("client", "model", "proto", "scripts", "tests", "deploy", "bench"):
            os.symlink(os.path.join(SOURCE, folder), os.path.join(self.directory, folder))
        self.ports = ports
        # `python3` is Debian's, the one with python3-grpcio, as on a machine make test set up.
        path = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]
        self.environment = dict(os.environ, PATH=path,
                                VIDCLF_SERVER=f"localhost:{ports['50051']}",
                                VIDCLF_HTTP_URL=f"http://localhost:{ports['8000']}")
        self.background = []

    def rewrite(self, text):
        """`text` with the default ports, after `localhost:` or a `-port` flag, made the test's."""
        return re.sub(r"(localhost:|127\.0\.0\.1:|-port )(\d+)\b",
                      lambda port: port.group(1) + str(self.ports.get(port.group(2),
                                                                      port.group(2))), text)

    def run(self, command):
        text = self.rewrite(command.text)
        if text.rstrip().endswith("&"):
            self.background.append(subprocess.Popen(
                ["bash", "-c", "exec " + text.rstrip()[:-1]], cwd=self.directory,
                env=self.environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True))
            return None
        return subprocess.run(["bash", "-o", "pipefail", "-c", text], cwd=self.directory,
                              env=self.environment, capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT_S)

    def close(self):
        for process in self.background:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=60)
        shutil.rmtree(self.directory)


def demo_labels():
    with open(os.path.join(DEMO, "repo", "demo", "1", "model.json")) as model:
        return json.load(model)["labels"]


class DocsCommandsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server, grpc_port, metrics_port, http_port = server_fixture.start_server(
            os.path.join(BIN, "vidclf-server"), os.path.join(DEMO, "repo"), "--http-port", "0")
        # Second servers (the training page's, the watch demo's, the sources page's) and the
        # dropping source.
        cls.ports = {"50051": grpc_port, "8000": http_port, "9464": metrics_port,
                     **{port: free_port() for port in ("50052", "50053", "8002", "18081")}}
        cls.labels = demo_labels()
        cls.took = []  # (seconds, where) of each command run

    @classmethod
    def tearDownClass(cls):
        server_fixture.stop_server(cls.server)
        # Where the test's time goes, for whoever makes it shorter.
        print("\nthe slowest commands:", file=sys.stderr)
        for seconds, where in sorted(cls.took, reverse=True)[:5]:
            print(f"  {seconds:6.1f} s  {where[:120]}", file=sys.stderr)

    def run_page(self, path):
        commands = runnable_commands(path)
        page = Page(self.ports)
        try:
            for command in commands:
                start = time.monotonic()
                result = page.run(command)
                if result is None:
                    continue
                self.took.append((time.monotonic() - start, command.where()))
                printed = result.stdout + "\n" + result.stderr
                self.assertEqual(result.returncode, command.exit_status,
                                 f"{command.where()}\nexited {result.returncode}:\n{printed}")
                missing = missing_lines([page.rewrite(line) for line in command.shown], printed,
                                        self.labels)
                self.assertEqual(missing, [], f"{command.where()}\nshown but not printed; it "
                                              f"printed:\n{printed}")
        finally:
            page.close()
        return commands

    def test_every_runnable_command_runs_as_written(self):
        pages = [os.path.join(SOURCE, "README.md")] + sorted(
            glob.glob(os.path.join(SOURCE, "docs", "*.md")))
        ran = 0
        for path in pages:
            with self.subTest(page=os.path.relpath(path, SOURCE)):
                ran += len(self.run_page(path))
        self.assertGreater(ran, 20, "fewer runnable commands than the pages hold")

    def test_an_output_the_command_no_longer_prints_fails(self):
        # The README's first classification, shown with a line the client does not print.
        with open(os.path.join(SOURCE, "README.md")) as readme:
            text = readme.read()
        copy = os.path.join(tempfile.mkdtemp(prefix="docs-commands-"), "README.md")
        self.addCleanup(shutil.rmtree, os.path.dirname(copy))
        with open(copy, "w") as page:
            page.write(text.replace("frames  15, 0.00 s to 1.08 s",
                                    "frames  15, 0.00 s to 1.08 s, 3 windows", 1))
        with self.assertRaises(AssertionError) as failure:
            self.run_page(copy)
        self.assertIn("shown but not printed", str(failure.exception))
        self.assertIn("3 windows", str(failure.exception))

    def test_a_command_that_fails_fails(self):
        copy = os.path.join(tempfile.mkdtemp(prefix="docs-commands-"), "page.md")
        self.addCleanup(shutil.rmtree, os.path.dirname(copy))
        with open(copy, "w") as page:
            page.write(f"{MARKER}\n```sh\nbuild/bin/vidclf classify no-such-file.mp4\n```\n")
        with self.assertRaises(AssertionError) as failure:
            self.run_page(copy)
        self.assertIn("exited 1", str(failure.exception))

    def test_shapes_mask_numbers_and_labels_and_dots_stand_for_anything(self):
        labels = ["fade_in", "zoom_out"]
        self.assertEqual(missing_lines(["1     fade_in   0.9998"], "1 zoom_out 0.51\n", labels), [])
        self.assertEqual(missing_lines(['{"a":[0,0.08,...,1],"b":2,...}'],
                                       '{"a":[0,0.04,0.08,0.5,1],"b":7,"c":"x"}', labels), [])
        self.assertEqual(missing_lines(["8 segments, 0 windows"], "8 segments\n", labels),
                         ["8 segments, 0 windows"])


if __name__ == "__main__":
    SOURCE, BIN, STUBS, DEMO = (os.path.abspath(argument) for argument in sys.argv[1:5])
    del sys.argv[1:5]
    unittest.main()
