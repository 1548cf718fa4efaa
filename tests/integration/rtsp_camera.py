#!/usr/bin/env python3
"""A real RTSP camera on loopback for the tests: Debian's gst-rtsp-server (through python3-gi)
serving live H.264 at 25 fps with a keyframe a second, over UDP or TCP as the client asks.

Run as a process, it prints "ready PORT" and then takes one command a line on stdin, answering
each with one line ("ok", or the figure asked for):
  freeze | thaw     stop and restart sending frames, keeping every session open
  unmount | mount   take the path away (RTSP 404) and put it back
  auth USER PASS    ask for these credentials from now on (RTSP 401 otherwise)
  sessions          how many RTSP sessions are open (TEARDOWN closes one; a client that only
                    drops its connection leaves it open until the session times out)
  quit
A test kills the process to kill the camera, and starts another on the same port to bring it
back. CameraProcess below does this for Python tests.

With --loop FILE --cameras N it is N cameras instead, /cam0 ... /cam{N-1}, each sending the
access units of FILE (H.264 Annex B with an access unit delimiter before each, as ffmpeg's
h264_metadata=aud=insert writes them) in a loop at 25 fps, without encoding anything: cameras
that cost little beside the server they feed (bench/cameras/). freeze/thaw then take a camera's
number ("freeze 3"); "all" for every one.
Usage: rtsp_camera.py [--port N] [--path /cam] [--width 320 --height 240]
       rtsp_camera.py --loop FILE.h264 --cameras N [--port N]
"""
import argparse
import os
import select
import subprocess
import sys
import threading
import time


def serve(args):
    import gi
    gi.require_version("Gst", "1.0")
    gi.require_version("GstRtspServer", "1.0")
    from gi.repository import GLib, Gst, GstRtspServer

    Gst.init(None)
    server = GstRtspServer.RTSPServer.new()
    server.set_address("127.0.0.1")
    server.set_service(str(args.port))
    factory = GstRtspServer.RTSPMediaFactory.new()
    # Encoded once for every client (shared), cheaply: a camera costs little beside the server.
    factory.set_launch(
        f"( videotestsrc is-live=true pattern=ball ! video/x-raw,width={args.width},"
        f"height={args.height},framerate=25/1 ! valve name=valve drop=false ! "
        "x264enc tune=zerolatency speed-preset=ultrafast key-int-max=25 bitrate=300 ! "
        "rtph264pay name=pay0 pt=96 config-interval=1 )")
    factory.set_shared(True)
    factory.add_role_from_structure(Gst.Structure.from_string(
        "user, media.factory.access=(boolean)true, media.factory.construct=(boolean)true")[0])
    valves = []

    def on_configure(_factory, media):
        valves.append(media.get_element().get_by_name("valve"))

    factory.connect("media-configure", on_configure)
    mounts = server.get_mount_points()
    mounts.add_factory(args.path, factory)

    def answer(words):
        if words and words[0] in ("freeze", "thaw"):
            for valve in valves:
                valve.set_property("drop", words[0] == "freeze")
        elif words == ["unmount"]:
            mounts.remove_factory(args.path)
        elif words == ["mount"]:
            mounts.add_factory(args.path, factory)
        elif len(words) == 3 and words[0] == "auth":
            auth = GstRtspServer.RTSPAuth.new()
            token = GstRtspServer.RTSPToken()
            token.set_string("media.factory.role", "user")
            auth.add_basic(GstRtspServer.RTSPAuth.make_basic(words[1], words[2]), token)
            server.set_auth(auth)
        else:
            return None
        return "ok"

    run_server(GLib, server, answer)


def run_server(GLib, server, answer):
    """Serves `server` on the main loop, taking one command a line from stdin: "sessions" and
    "quit" here, the others through `answer(words)`, which returns the line to print ("ok"), or
    None for a command it does not know. Prints "ready PORT" once listening."""
    loop = GLib.MainLoop()
    pool = server.get_session_pool()

    def command(line):
        words = line.split()
        if words == ["quit"]:
            loop.quit()
            return False
        reply = str(pool.get_n_sessions()) if words == ["sessions"] else answer(words)
        print(reply or f"unknown command {line!r}", flush=True)
        return False

    def read_commands():
        for line in sys.stdin:
            GLib.idle_add(command, line.strip())
        GLib.idle_add(loop.quit)

    def expire_sessions():
        pool.cleanup()  # sessions whose client went away without a TEARDOWN time out
        return True

    server.attach(None)
    GLib.timeout_add_seconds(1, expire_sessions)
    threading.Thread(target=read_commands, daemon=True).start()
    print(f"ready {server.get_bound_port()}", flush=True)
    loop.run()


def serve_loops(args):
    import gi
    gi.require_version("Gst", "1.0")
    gi.require_version("GstRtspServer", "1.0")
    from gi.repository import GLib, Gst, GstRtspServer

    Gst.init(None)
    with open(args.loop, "rb") as clip:
        data = clip.read()
    delimiter = b"\x00\x00\x00\x01\x09"
    units = [delimiter + unit for unit in data.split(delimiter) if unit]
    server = GstRtspServer.RTSPServer.new()
    server.set_address("127.0.0.1")
    server.set_service(str(args.port))
    mounts = server.get_mount_points()
    frame_seconds = 1 / 25
    # Per camera: the sources of its media (one while any client watches), and whether frozen.
    playing = {}
    frozen = set()

    def add_camera(number):
        factory = GstRtspServer.RTSPMediaFactory.new()
        factory.set_launch(
            "( appsrc name=src is-live=true do-timestamp=true format=time "
            "caps=video/x-h264,stream-format=byte-stream,alignment=au,framerate=25/1 "
            "! h264parse ! rtph264pay name=pay0 pt=96 config-interval=1 )")
        factory.set_shared(True)

        def on_configure(_factory, media):
            source = media.get_element().get_by_name("src")
            state = {"source": source, "start": None, "sent": 0}
            playing.setdefault(number, []).append(state)
            media.connect("unprepared", lambda _media: playing[number].remove(state))

        factory.connect("media-configure", on_configure)
        mounts.add_factory(f"/cam{number}", factory)

    for number in range(args.cameras):
        add_camera(number)

    def push():
        now = time.monotonic()
        # Media are configured and unprepared on the server's own threads: iterate over copies.
        for number, states in list(playing.items()):
            for state in list(states):
                if state["start"] is None:
                    state["start"] = now
                # Every frame that is due, so that a late tick does not slow the camera down.
                due = int((now - state["start"]) / frame_seconds) + 1
                while state["sent"] < due:
                    unit = units[state["sent"] % len(units)]
                    state["sent"] += 1
                    if number not in frozen:
                        state["source"].emit("push-buffer", Gst.Buffer.new_wrapped(unit))
        return True

    def answer(words):
        if len(words) != 2 or words[0] not in ("freeze", "thaw"):
            return None
        numbers = range(args.cameras) if words[1] == "all" else [int(words[1])]
        for number in numbers:
            (frozen.add if words[0] == "freeze" else frozen.discard)(number)
        return "ok"

    GLib.timeout_add(10, push)
    run_server(GLib, server, answer)


class CameraProcess:
    """The camera as a child process: start(), command(), kill(), and start() again on the same
    port."""

    def __init__(self, path="/cam", port=0, width=320, height=240, loop=None, cameras=1):
        self.path, self.port, self.width, self.height = path, port, width, height
        self.loop, self.cameras = loop, cameras
        self.process = None

    def start(self):
        mode = (["--loop", self.loop, "--cameras", str(self.cameras)] if self.loop else
                ["--path", self.path, "--width", str(self.width), "--height", str(self.height)])
        self.process = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--port", str(self.port), *mode],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self._read_line(30)
        if not line.startswith("ready "):
            raise RuntimeError(f"the RTSP camera did not start: {line!r}")
        self.port = int(line.split()[1])
        return self

    def uri(self, credentials=""):
        at = f"{credentials}@" if credentials else ""
        return f"rtsp://{at}127.0.0.1:{self.port}{self.path}"

    def command(self, line):
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        return self._read_line(10)

    def sessions(self):
        return int(self.command("sessions"))

    def kill(self):
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process.stdin.close()
            self.process.stdout.close()
            self.process = None

    def _read_line(self, timeout_seconds):
        ready, _, _ = select.select([self.process.stdout], [], [], timeout_seconds)
        if not ready:
            raise RuntimeError("the RTSP camera did not answer")
        return self.process.stdout.readline().strip()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--path", default="/cam")
    parser.add_argument("--width", type=int, default=320)
    parser.add_argument("--height", type=int, default=240)
    parser.add_argument("--loop", help="an H.264 Annex B file each camera sends in a loop")
    parser.add_argument("--cameras", type=int, default=1)
    arguments = parser.parse_args()
    (serve_loops if arguments.loop else serve)(arguments)
