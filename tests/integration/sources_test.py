#!/usr/bin/env python3
"""Cameras as resources, from outside: the Sources API of a real vidclf-server over grpcio,
against real RTSP cameras (Debian's gst-rtsp-server, rtsp_camera.py) on loopback.

Covers create, get, list (pages, filters), update and delete; every field's hostile values; a
camera killed, frozen, answering 404 and then back, answering 401 (FAILED after one try);
TEARDOWN whenever the server lets go of a camera, counted on the camera; Subscribe; the
registrations kept across SIGTERM and SIGKILL, and a state file that cannot be read; admin
tokens; WatchSource's TEARDOWN, 404 policy and RTSP over TCP; and the client's `vidclf sources`,
`watch` and `stream` against the same cameras.
Usage: sources_test.py SERVER_BINARY CLIENT_BINARY TRAIN_BINARY PROTO_DIR
"""
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import grpc

import rtsp_camera
import server_fixture
from server_fixture import stop_server

SERVER, CLIENT, TRAIN, PROTO_DIR = sys.argv[1:5]
del sys.argv[1:5]

ADMIN_TOKEN = "admin-token-0123456789abcdef"
INFERENCE_TOKEN = "inference-token-0123456789abcdef"


def generate_messages(out_dir):
    subprocess.run(["protoc", f"--proto_path={PROTO_DIR}", f"--python_out={out_dir}",
                    "vidclf/v1/video_classifier.proto", "vidclf/v1/sources.proto"], check=True)
    for package in ("vidclf", "vidclf/v1"):
        open(os.path.join(out_dir, package, "__init__.py"), "a").close()
    sys.path.insert(0, out_dir)
    from vidclf.v1 import sources_pb2, video_classifier_pb2
    return sources_pb2, video_classifier_pb2


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# The allowlist names each camera's port: one a test's camera is given, by its path.
CAMERA_PORTS = {path: free_port() for path in
                ("/cam", "/locked", "/relay", "/frozen", "/killed", "/gone", "/watch-locked",
                 "/restart", "/mqtt")}


def make_camera(path):
    return rtsp_camera.CameraProcess(path=path, port=CAMERA_PORTS[path])


def setUpModule():
    global TMP, PB, VC, REPO, CAMERA, VIDEOS
    TMP = tempfile.TemporaryDirectory()
    PB, VC = generate_messages(TMP.name)
    REPO, _ = server_fixture.train_small_repository(TRAIN, TMP.name)
    # Beside the GRU ("small"), a transformer with causal-linear attention, whose stream state is
    # its attention's running sums.
    work = os.path.join(TMP.name, "work")
    for command in (["fit", "--work", work, "--run", "causal", "--head", "transformer",
                     "--attention", "causal-linear", "--epochs", "2", "--d-model", "32",
                     "--num-layers", "1", "--ffn-size", "64"],
                    ["eval", "--work", work, "--run", "causal"],
                    ["export", "--work", work, "--run", "causal", "--output-repository", REPO]):
        subprocess.run([TRAIN, *command], check=True, stdout=subprocess.DEVNULL)
    # A recorded video for a file source played as a camera.
    VIDEOS = os.path.join(TMP.name, "videos")
    os.makedirs(VIDEOS)
    subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-f", "lavfi", "-i",
                    "testsrc2=size=320x240:rate=25", "-t", "12", "-c:v", "libx264", "-g", "25",
                    os.path.join(VIDEOS, "replay.mkv")], check=True)
    CAMERA = make_camera("/cam").start()


def tearDownModule():
    for server in SERVERS:
        if server.poll() is None:
            server.kill()
            server.wait()
    CAMERA.kill()
    TMP.cleanup()


# Every wait is for something that happens: a busy machine (the other suites beside this one,
# the camera's encoder starved) only makes it come later, so each may take this many times the
# seconds it names before it fails.
PATIENCE = 4


def wait_sessions(camera, count):
    """Waits for the camera to hold `count` sessions: it handles a TEARDOWN a moment after the
    server has sent it."""
    wait_for(lambda: camera.sessions() == count, 5, f"{count} sessions on the camera")


def wait_for(predicate, timeout=30, what="the condition"):
    """Polls `predicate` until it returns something true, for up to PATIENCE * `timeout` seconds;
    returns it."""
    deadline = time.monotonic() + PATIENCE * timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


class Client:
    """The Sources API over one channel."""

    def __init__(self, port, token=None):
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.metadata = [("authorization", f"Bearer {token}")] if token else None

    def call(self, method, request, response_type, timeout=30):
        stub = self.channel.unary_unary(f"/vidclf.v1.Sources/{method}",
                                        request_serializer=type(request).SerializeToString,
                                        response_deserializer=response_type.FromString)
        return stub(request, timeout=timeout, metadata=self.metadata)

    def create(self, source_id, uri, **fields):
        config = fields.pop("config", VC.StreamConfig(embed_stride=5))
        return self.call("CreateSource", PB.CreateSourceRequest(
            source_id=source_id, source=PB.Source(uri=uri, config=config, **fields)), PB.Source)

    def get(self, source_id):
        return self.call("GetSource", PB.GetSourceRequest(name=f"sources/{source_id}"), PB.Source)

    def list(self, **fields):
        return self.call("ListSources", PB.ListSourcesRequest(**fields), PB.ListSourcesResponse)

    def update(self, source, paths):
        request = PB.UpdateSourceRequest(source=source)
        request.update_mask.paths.extend(paths)
        return self.call("UpdateSource", request, PB.Source)

    def delete(self, source_id):
        from google.protobuf import empty_pb2
        return self.call("DeleteSource", PB.DeleteSourceRequest(name=f"sources/{source_id}"),
                         empty_pb2.Empty)

    def subscribe(self, names=()):
        stub = self.channel.unary_stream("/vidclf.v1.Sources/Subscribe",
                                         request_serializer=PB.SubscribeRequest.SerializeToString,
                                         response_deserializer=PB.SourceUpdate.FromString)
        return stub(PB.SubscribeRequest(names=list(names)), metadata=self.metadata)

    def watch(self, uri, **fields):
        stub = self.channel.unary_stream(
            "/vidclf.v1.VideoClassifier/WatchSource",
            request_serializer=VC.WatchSourceRequest.SerializeToString,
            response_deserializer=VC.WatchSourceResponse.FromString)
        config = fields.pop("config", VC.StreamConfig(embed_stride=5))
        return stub(VC.WatchSourceRequest(uri=uri, config=config, **fields), timeout=60)

    def state(self, source_id):
        return PB.SourceStatus.State.Name(self.get(source_id).status.state)

    def wait_state(self, source_id, state, timeout=30):
        return wait_for(lambda: self.state(source_id) == state and self.get(source_id),
                        timeout, f"{source_id} to be {state} (it is {self.state(source_id)})")


def forget_sources(client):
    """Deletes what a test left registered (one that failed before its own delete), so that the
    next test finds the shared camera as the suite found it: no source, no session."""
    for source in client.list().sources:
        client.delete(source.name.removeprefix("sources/"))
    wait_sessions(CAMERA, 0)


# Every server start_server started: one that a failed test left running is killed at the end,
# or it would hold ctest's output open until the test's timeout.
SERVERS = []


def start_server(*flags):
    """Starts a server that may pull every test camera; returns it and its gRPC port, and keeps
    its metrics port and its HTTP port (when it has one) as attributes of this function."""
    started = server_fixture.start_server(
        SERVER, REPO, "--allow-uri",
        ",".join([f"rtsp://127.0.0.1:{port}/" for port in CAMERA_PORTS.values()] +
                 [f"file://{VIDEOS}/"]),
        "--max-streams", "32", *flags)
    SERVERS.append(started[0])
    start_server.metrics_port = started[2]
    start_server.http_port = started[3] if len(started) > 3 else None
    return started[0], started[1]


class SourcesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server, cls.port = start_server()
        cls.metrics_port = start_server.metrics_port
        cls.client = Client(cls.port)

    @classmethod
    def tearDownClass(cls):
        stop_server(cls.server)

    def setUp(self):
        self.addCleanup(forget_sources, self.client)

    def assertRefused(self, code, fragment, call, *args, **kwargs):
        with self.assertRaises(grpc.RpcError) as raised:
            call(*args, **kwargs)
        self.assertEqual(raised.exception.code(), code, raised.exception.details())
        self.assertIn(fragment, raised.exception.details())
        return raised.exception.details()

    def test_create_get_list_and_delete_sends_teardown(self):
        created = self.client.create("cam-crud", CAMERA.uri(), labels={"site": "north"})
        self.assertEqual(created.name, "sources/cam-crud")
        live = self.client.wait_state("cam-crud", "LIVE")
        wait_for(lambda: self.client.get("cam-crud").status.frames_per_second > 15, 20,
                 "25 frames a second")
        live = self.client.get("cam-crud")
        self.assertIn("h264 320x240", live.status.description)
        self.assertGreater(live.status.frames, 0)
        # The settings left at 0 answer with the values in force.
        self.assertEqual((live.stall_timeout_seconds, live.checkpoint_interval_seconds,
                          live.max_resume_gap_seconds, live.max_reconnects), (5, 10, 120, 0))
        wait_sessions(CAMERA, 1)
        status, _, body = server_fixture.http(self.metrics_port, "/metrics")
        metrics = body.decode()
        self.assertEqual(status, 200)
        self.assertIn('vidclf_source_state{source="cam-crud",state="LIVE"} 1', metrics)
        self.assertIn('vidclf_sources{state="LIVE"} 1', metrics)
        self.assertRegex(metrics, r'vidclf_source_frames_total\{source="cam-crud"\} [1-9]')
        names = [s.name for s in self.client.list().sources]
        self.assertIn("sources/cam-crud", names)
        self.assertEqual([s.name for s in self.client.list(filter="labels.site=north").sources],
                         ["sources/cam-crud"])
        self.assertIn("sources/cam-crud",
                      [s.name for s in self.client.list(filter="state=LIVE").sources])
        self.assertEqual(len(self.client.list(filter="labels.site=south").sources), 0)
        self.client.delete("cam-crud")
        wait_sessions(CAMERA, 0)  # the TEARDOWN
        self.assertRefused(grpc.StatusCode.NOT_FOUND, "no source sources/cam-crud",
                           self.client.get, "cam-crud")

    def test_pages(self):
        for i in range(5):
            self.client.create(f"page-{i}", CAMERA.uri(), paused=True, labels={"set": "pages"})
        seen, token, tokens = [], "", []
        while True:
            page = self.client.list(page_size=2, page_token=token, filter="labels.set=pages")
            self.assertLessEqual(len(page.sources), 2)
            seen += [s.name for s in page.sources]
            token = page.next_page_token
            if not token:
                break
            tokens.append(token)
        self.assertEqual(seen, [f"sources/page-{i}" for i in range(5)])
        # A token goes with the filter and page size it was issued for (AIP-158).
        invalid = grpc.StatusCode.INVALID_ARGUMENT
        self.assertRefused(invalid, "page_token", self.client.list, page_size=3,
                           page_token=tokens[0], filter="labels.set=pages")
        self.assertRefused(invalid, "page_token", self.client.list, page_size=2,
                           page_token=tokens[0])
        self.assertEqual(self.client.get("page-0").status.state, PB.SourceStatus.PAUSED)
        time.sleep(1)
        self.assertEqual(CAMERA.sessions(), 0)  # paused sources pull nothing
        for i in range(5):
            self.client.delete(f"page-{i}")

    def test_hostile_fields_are_refused_naming_the_field(self):
        uri = CAMERA.uri()
        invalid = grpc.StatusCode.INVALID_ARGUMENT
        for bad_id in ["a/b", "x" * 10240, "Cam", "1cam", "cam-", "", "cam\u00e9", "../etc"]:
            self.assertRefused(invalid, "source_id", self.client.create, bad_id, uri)
        self.assertRefused(grpc.StatusCode.PERMISSION_DENIED, "source.uri",
                           self.client.create, "outside", "rtsp://10.0.0.1/cam")
        self.assertRefused(grpc.StatusCode.PERMISSION_DENIED, "source.uri",
                           self.client.create, "outside-file", "file:///etc/passwd")
        self.assertRefused(invalid, "source.uri is required", self.client.create, "no-uri", "")
        self.assertRefused(invalid, "input_options: 'protocol_whitelist'", self.client.create,
                           "bad-option", uri, input_options={"protocol_whitelist": "file"})
        self.assertRefused(invalid, "rtsp_transport may be", self.client.create, "bad-transport",
                           uri, input_options={"rtsp_transport": "carrier-pigeon"})
        self.assertRefused(invalid, "stall_timeout_seconds", self.client.create, "stall",
                           uri, stall_timeout_seconds=1e12)
        self.assertRefused(invalid, "stall_timeout_seconds", self.client.create, "stall-nan",
                           uri, stall_timeout_seconds=float("nan"))
        self.assertRefused(invalid, "source.labels", self.client.create, "label", uri,
                           labels={"Bad Key": "x"})
        self.assertRefused(invalid, "source.config.model", self.client.create, "model", uri,
                           config=VC.StreamConfig(model="no-such-model"))
        self.assertRefused(invalid, "source.config", self.client.create, "emit", uri,
                           config=VC.StreamConfig(emit_every_seconds=float("inf")))
        self.assertRefused(invalid, "page_size", self.client.list, page_size=100000)
        self.assertRefused(invalid, "page_token", self.client.list, page_token="../x")
        # Page tokens are opaque (AIP-158): one the server never issued is refused, not read.
        self.assertRefused(invalid, "page_token", self.client.list, page_token="garbage-token")
        self.assertRefused(invalid, "filter", self.client.list, filter="uri=rtsp://x")
        self.assertRefused(invalid, "update_mask", self.client.update,
                           PB.Source(name="sources/none"), [])
        self.assertRefused(invalid, "update_mask: 'name'", self.client.update,
                           PB.Source(name="sources/none"), ["name"])
        self.assertRefused(invalid, "name: source_id '../x'", self.client.get, "../x")
        # Nothing refused was registered, and nothing was pulled.
        self.assertEqual([s.name for s in self.client.list().sources
                          if not s.name.startswith("sources/page-")], [])
        self.client.create("twice", uri, paused=True)
        self.assertRefused(grpc.StatusCode.ALREADY_EXISTS, "exists already",
                           self.client.create, "twice", uri)
        self.client.delete("twice")

    def test_credentials_refused_fail_after_one_try_and_stay_secret(self):
        camera = make_camera("/locked").start()
        try:
            self.assertEqual(camera.command("auth viewer right-password"), "ok")
            self.client.create("locked", camera.uri("viewer:wrong-password"))
            failed = self.client.wait_state("locked", "FAILED")
            self.assertIn("refused the credentials", failed.status.last_error)
            self.assertEqual(failed.status.reconnects, 0)
            time.sleep(2)  # no second try
            again = self.client.get("locked")
            self.assertEqual(again.status.state, PB.SourceStatus.FAILED)
            self.assertEqual(again.status.state_time, failed.status.state_time)
            for text in (str(again), str(self.client.list())):
                self.assertNotIn("wrong-password", text)
            # Updated with the right credentials, it is followed.
            fixed = PB.Source(name="sources/locked", uri=camera.uri("viewer:right-password"))
            self.client.update(fixed, ["uri"])
            self.client.wait_state("locked", "LIVE")
            self.assertNotIn("right-password", str(self.client.get("locked")))
            self.client.delete("locked")
            wait_sessions(camera, 0)
        finally:
            camera.kill()

    def test_not_found_is_retried_until_the_path_is_back(self):
        camera = make_camera("/relay").start()
        try:
            self.assertEqual(camera.command("unmount"), "ok")
            self.client.create("relay", camera.uri())
            backing_off = self.client.wait_state("relay", "BACKING_OFF")
            self.assertIn("was not found", backing_off.status.last_error)
            self.assertEqual(camera.command("mount"), "ok")
            self.client.wait_state("relay", "LIVE")
            self.client.delete("relay")
        finally:
            camera.kill()

    def test_frozen_camera_stalls_then_comes_back(self):
        camera = make_camera("/frozen").start()
        try:
            self.client.create("frozen", camera.uri(), stall_timeout_seconds=1)
            self.client.wait_state("frozen", "LIVE")
            self.assertEqual(camera.command("freeze"), "ok")
            stalled = self.client.wait_state("frozen", "STALLED", timeout=8)
            self.assertIn("no frame for 1s", stalled.status.last_error)
            self.assertEqual(camera.command("thaw"), "ok")
            self.client.wait_state("frozen", "LIVE")
            self.client.delete("frozen")
        finally:
            camera.kill()

    def test_killed_camera_is_followed_again_when_back(self):
        camera = make_camera("/killed").start()
        try:
            self.client.create("killed", camera.uri(), stall_timeout_seconds=1)
            self.client.wait_state("killed", "LIVE")
            frames = self.client.get("killed").status.frames
            camera.kill()
            wait_for(lambda: self.client.state("killed") in ("STALLED", "BACKING_OFF"), 15,
                     "the drop to be seen")
            camera.start()  # on the same port
            back = self.client.wait_state("killed", "LIVE", timeout=40)
            self.assertGreaterEqual(back.status.reconnects, 1)
            wait_for(lambda: self.client.get("killed").status.frames > frames, 10, "new frames")
            self.client.delete("killed")
            wait_sessions(camera, 0)
        finally:
            camera.kill()

    def test_subscribe_hears_predictions_and_state_changes(self):
        self.client.create("heard", CAMERA.uri(), paused=True)
        updates = self.client.subscribe(["sources/heard"])
        never_read = self.client.subscribe()  # a subscriber that never reads
        self.client.update(PB.Source(name="sources/heard", paused=False), ["paused"])
        states, predictions = [], 0
        for update in updates:
            self.assertEqual(update.name, "sources/heard")
            if update.HasField("status"):
                states.append(PB.SourceStatus.State.Name(update.status.state))
            if update.HasField("prediction"):
                predictions += 1
                self.assertGreater(len(update.prediction.top_k), 0)
            if predictions >= 10:
                break
        updates.cancel()
        self.assertIn("LIVE", states)
        self.assertEqual(self.client.get("heard").status.state, PB.SourceStatus.LIVE)
        self.client.delete("heard")
        never_read.cancel()
        self.assertRefused(grpc.StatusCode.NOT_FOUND, "no source sources/none",
                           lambda: next(iter(self.client.subscribe(["sources/none"]))))

    def test_a_model_change_takes_over_without_a_gap(self):
        events = VC.SegmentEventOptions(threshold=0.01, hysteresis=0.005, min_seconds=0.2)
        # Paused until its subscriber listens, which then hears the first segments start.
        self.client.create("switched", CAMERA.uri(), paused=True, config=VC.StreamConfig(
            model="small", embed_stride=5, segment_events=events))
        updates = self.client.subscribe(["sources/switched"])
        heard = []  # (model, arrival) of each prediction
        # (label, start) of the segments announced before the update, and of those ended.
        starts, ends = set(), set()
        updating = threading.Event()

        def read():
            try:
                for update in updates:
                    if update.HasField("prediction"):
                        heard.append((update.prediction.model, time.monotonic()))
                    for event in update.events.events:
                        segment = (event.label, round(event.start_seconds, 3))
                        if event.kind == VC.SegmentEvent.SEGMENT_START and not updating.is_set():
                            starts.add(segment)
                        if event.kind == VC.SegmentEvent.SEGMENT_END:
                            ends.add(segment)
            except grpc.RpcError:
                pass  # cancelled below
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        self.client.update(PB.Source(name="sources/switched", paused=False), ["paused"])
        self.client.wait_state("switched", "LIVE")
        wait_sessions(CAMERA, 1)
        wait_for(lambda: len(heard) >= 3 and starts, 20, "predictions and segments of the first")
        updating.set()
        updated = self.client.update(PB.Source(name="sources/switched", config=VC.StreamConfig(
            model="causal", embed_stride=5, segment_events=events)), ["config"])
        self.assertIn("took over", updated.status.resume_note)
        wait_for(lambda: sum(model == "causal" for model, _ in heard) >= 3, 30,
                 "predictions of the new model")
        # Every segment the first model announced ends, those open at the switch too.
        wait_for(lambda: starts <= ends, 10, f"ends of {starts - ends}")
        updates.cancel()
        reader.join(timeout=10)
        models = [model for model, _ in heard]
        switch = models.index("causal")
        # The first model until the new one's first prediction, never the two interleaved.
        self.assertEqual(set(models[:switch]), {"small"})
        self.assertEqual(set(models[switch:]), {"causal"})
        print(f"model change: {heard[switch][1] - heard[switch - 1][1]:.3f} s between the last "
              "prediction of the first model and the first of the next", file=sys.stderr)
        wait_sessions(CAMERA, 1)  # the earlier session's TEARDOWN
        switched = self.client.get("switched")
        self.assertEqual(switched.status.state, PB.SourceStatus.LIVE)
        self.assertEqual(switched.config.model, "causal")
        self.client.delete("switched")
        wait_sessions(CAMERA, 0)

    def test_watch_over_tcp_sends_teardown_when_cancelled(self):
        watch = self.client.watch(CAMERA.uri(), input_options={"rtsp_transport": "tcp"})
        try:
            predictions = 0
            for response in watch:
                if response.HasField("prediction"):
                    predictions += 1
                if predictions >= 5:
                    break
            wait_sessions(CAMERA, 1)
        finally:
            watch.cancel()
        wait_sessions(CAMERA, 0)

    def test_watch_retries_a_path_not_found(self):
        camera = make_camera("/gone").start()
        try:
            camera.command("unmount")
            watch = self.client.watch(camera.uri(), max_reconnects=3)
            first = next(iter(watch))
            self.assertEqual(first.source.kind, VC.SourceEvent.DROPPED)
            self.assertIn("was not found", first.source.message)
            camera.command("mount")
            for response in watch:
                if response.HasField("prediction"):
                    break
            watch.cancel()
        finally:
            camera.kill()

    def test_watch_refused_credentials_end_at_once(self):
        camera = make_camera("/watch-locked").start()
        try:
            camera.command("auth viewer right-password")
            with self.assertRaises(grpc.RpcError) as raised:
                list(self.client.watch(camera.uri("viewer:wrong-password")))
            self.assertEqual(raised.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
            self.assertIn("refused the credentials", raised.exception.details())
            self.assertNotIn("wrong-password", raised.exception.details())
        finally:
            camera.kill()


class ClientTest(unittest.TestCase):
    """The vidclf client's sources, watch and stream subcommands."""

    @classmethod
    def setUpClass(cls):
        cls.server, cls.port = start_server()

    @classmethod
    def tearDownClass(cls):
        stop_server(cls.server)

    def setUp(self):
        self.addCleanup(forget_sources, Client(self.port))

    def vidclf(self, *args, timeout=60):
        # --server wins over VIDCLF_SERVER, which names nothing here, in every subcommand.
        return subprocess.run([CLIENT, *args, "--server", f"127.0.0.1:{self.port}"],
                              capture_output=True, text=True, timeout=timeout,
                              env=dict(os.environ, VIDCLF_SERVER="127.0.0.1:1"))

    def test_sources_subcommands(self):
        added = self.vidclf("sources", "add", "from-cli", CAMERA.uri(), "--label", "by=cli",
                            "--input-option", "rtsp_transport=tcp", "--embed-stride", "5",
                            "--realtime")
        self.assertEqual(added.returncode, 0, added.stderr)
        self.assertIn("from-cli", added.stdout)
        client = Client(self.port)
        live = client.wait_state("from-cli", "LIVE")
        self.assertEqual(dict(live.input_options), {"rtsp_transport": "tcp"})
        self.assertTrue(live.realtime)
        listed = self.vidclf("sources", "list", "--json", "--filter", "labels.by=cli")
        self.assertEqual(listed.returncode, 0, listed.stderr)
        lines = [json.loads(line) for line in listed.stdout.splitlines()]
        self.assertEqual([line["name"] for line in lines], ["sources/from-cli"])
        self.assertEqual(lines[0]["status"]["state"], "LIVE")
        self.assertEqual({key: lines[0].get(key) for key in
                          ("stall_timeout_seconds", "checkpoint_interval_seconds",
                           "max_resume_gap_seconds", "max_reconnects")},
                         {"stall_timeout_seconds": 5, "checkpoint_interval_seconds": 10,
                          "max_resume_gap_seconds": 120, "max_reconnects": 0})
        paused = self.vidclf("sources", "update", "from-cli", "--pause")
        self.assertEqual(paused.returncode, 0, paused.stderr)
        self.assertIn("PAUSED", paused.stdout)
        self.assertEqual(dict(client.get("from-cli").labels), {"by": "cli"})  # kept
        got = self.vidclf("sources", "get", "from-cli")
        self.assertIn("PAUSED", got.stdout)
        nothing = self.vidclf("sources", "update", "from-cli")
        self.assertEqual(nothing.returncode, 2)
        self.assertIn("give what to change", nothing.stderr)
        deleted = self.vidclf("sources", "delete", "from-cli")
        self.assertEqual(deleted.returncode, 0, deleted.stderr)
        missing = self.vidclf("sources", "get", "from-cli")
        self.assertEqual(missing.returncode, 1)
        self.assertIn("NOT_FOUND: no source sources/from-cli", missing.stderr)
        bad = self.vidclf("sources", "add", "Bad/Id", CAMERA.uri())
        self.assertEqual(bad.returncode, 1)
        self.assertIn("INVALID_ARGUMENT: source_id", bad.stderr)

    def test_subscribe_prints_updates(self):
        Client(self.port).create("sub-cli", CAMERA.uri())
        counted = self.vidclf("sources", "subscribe", "sub-cli", "--json", "--count", "2")
        self.assertEqual(counted.returncode, 0, counted.stderr)
        self.assertEqual([json.loads(line)["name"] for line in counted.stdout.splitlines()],
                         ["sources/sub-cli"] * 2)
        subscriber = subprocess.Popen(
            [CLIENT, "sources", "subscribe", "sub-cli", "--json", "--server",
             f"127.0.0.1:{self.port}"], stdout=subprocess.PIPE, text=True)
        try:
            first = json.loads(subscriber.stdout.readline())
            self.assertEqual(first["name"], "sources/sub-cli")
        finally:
            subscriber.send_signal(signal.SIGINT)
            self.assertEqual(subscriber.wait(timeout=10), 130)
            subscriber.stdout.close()
        Client(self.port).delete("sub-cli")

    def test_subscribe_says_what_it_waits_on(self):
        # A source that sends nothing (paused here; one that cannot connect alike) is named on
        # stderr with its state at once, rather than waited on without a word.
        Client(self.port).create("waited-on", CAMERA.uri(), paused=True)
        subscriber = subprocess.Popen(
            [CLIENT, "sources", "subscribe", "waited-on", "--server", f"127.0.0.1:{self.port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            self.assertIn("waited-on is PAUSED: its predictions come once it is LIVE",
                          subscriber.stderr.readline())
        finally:
            subscriber.send_signal(signal.SIGINT)
            self.assertEqual(subscriber.wait(timeout=10), 130)
            subscriber.stderr.close()
        # --timeout-seconds ends a wait for --count updates that do not come, saying so.
        bounded = self.vidclf("sources", "subscribe", "waited-on", "--count", "1",
                              "--timeout-seconds", "2")
        self.assertNotEqual(bounded.returncode, 0, bounded.stderr)
        self.assertIn("DEADLINE_EXCEEDED", bounded.stderr)

    def test_watch_blames_the_camera_not_the_server_for_refused_credentials(self):
        camera = make_camera("/watch-locked").start()
        try:
            camera.command("auth viewer right-password")
            watched = self.vidclf("watch", camera.uri("viewer:wrong-password"),
                                  "--input-option", "rtsp_transport=tcp")
            self.assertEqual(watched.returncode, 1)
            self.assertIn("PERMISSION_DENIED", watched.stderr)
            self.assertIn("refused the credentials", watched.stderr)
            self.assertNotIn("server unavailable", watched.stderr)
            self.assertNotIn("wrong-password", watched.stdout + watched.stderr)
        finally:
            camera.kill()

    def test_stream_hides_the_password_and_fails_when_the_camera_dies(self):
        camera = make_camera("/killed").start()
        streamed = subprocess.Popen(
            [CLIENT, "stream", camera.uri("viewer:secret-password"), "--embed-stride", "5",
             "--server", f"127.0.0.1:{self.port}"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: streamed.stdout.readline().startswith("frames"), 30,
                     "a prediction")
            wait_sessions(camera, 1)
        finally:
            camera.kill()
        out, err = streamed.communicate(timeout=60)
        self.assertEqual(streamed.returncode, 1, err)
        self.assertIn("UNAVAILABLE", err)
        self.assertNotIn("secret-password", out + err)
        self.assertIn("<redacted>", err)

    def test_window_sampling_of_a_camera_completes(self):
        classified = self.vidclf("classify", CAMERA.uri(), "--sampling", "window",
                                 "--num-frames", "4", "--json", timeout=60)
        self.assertEqual(classified.returncode, 0, classified.stderr)
        self.assertEqual(json.loads(classified.stdout)["frames_used"], 4)

    def test_stream_sends_teardown_when_interrupted(self):
        streamed = subprocess.Popen(
            [CLIENT, "stream", CAMERA.uri(), "--embed-stride", "5", "--server",
             f"127.0.0.1:{self.port}"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        wait_for(lambda: streamed.stdout.readline().startswith("frames"), 30, "a prediction")
        wait_sessions(CAMERA, 1)
        streamed.send_signal(signal.SIGINT)
        self.assertEqual(streamed.wait(timeout=20), 130)
        streamed.stdout.close()
        wait_sessions(CAMERA, 0)


class RestTest(unittest.TestCase):
    """The same resources over the HTTP door, with curl, and its token rules."""

    def curl(self, method, path, body=None, token=None):
        command = ["curl", "-sS", "-X", method, "-w", "\n%{http_code}",
                   f"http://127.0.0.1:{self.http_port}{path}"]
        if body is not None:
            command += ["-H", "Content-Type: application/json", "--data-binary", json.dumps(body)]
        if token:
            command += ["-H", f"Authorization: Bearer {token}"]
        result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)
        text, code = result.stdout.rsplit("\n", 1)
        return int(code), json.loads(text)

    def test_rest(self):
        tokens = os.path.join(TMP.name, "rest-tokens")
        admin = os.path.join(TMP.name, "rest-admin-tokens")
        with open(tokens, "w") as out:
            out.write(INFERENCE_TOKEN + "\n")
        with open(admin, "w") as out:
            out.write(ADMIN_TOKEN + "\n")
        server, port = start_server("--http-port", "0", "--token-file", tokens,
                                    "--admin-token-file", admin)
        try:
            self.http_port = start_server.http_port
            source = {"uri": CAMERA.uri(), "config": {"embed_stride": 5},
                      "labels": {"door": "rest"}}
            # Subscribe as server-sent events, with curl: every source, from before it exists.
            events = self.subscribe_sse("", INFERENCE_TOKEN)
            code, answer = self.curl("POST", "/v1/sources?source_id=rest-cam", source,
                                     INFERENCE_TOKEN)
            self.assertEqual((code, "admin token" in answer["error"]), (403, True))
            code, answer = self.curl("POST", "/v1/sources?source_id=rest-cam", source)
            self.assertEqual(code, 401)
            code, created = self.curl("POST", "/v1/sources?source_id=rest-cam", source,
                                      ADMIN_TOKEN)
            self.assertEqual(code, 200, created)
            self.assertEqual(created["name"], "sources/rest-cam")
            code, answer = self.curl("POST", "/v1/sources?source_id=rest-cam", source,
                                     ADMIN_TOKEN)
            self.assertEqual(code, 409)
            wait_for(lambda: self.curl("GET", "/v1/sources/rest-cam", token=INFERENCE_TOKEN)[1]
                     ["status"]["state"] == "LIVE", 30, "rest-cam to be LIVE")
            states, predictions = [], 0
            for update in self.read_sse(events):
                self.assertEqual(update["name"], "sources/rest-cam")
                if "status" in update:
                    states.append(update["status"]["state"])
                if "prediction" in update:
                    predictions += 1
                    self.assertTrue(update["prediction"]["top_k"])
                if predictions >= 5:
                    break
            self.assertIn("LIVE", states)
            events.kill()  # the client goes; the server goes on
            events.wait()
            events.stdout.close()
            code, answer = self.curl("GET", "/v1/sources:subscribe?names=sources/nothing",
                                     token=INFERENCE_TOKEN)
            self.assertEqual((code, answer["error"]), (404, "no source sources/nothing"))
            code, answer = self.curl("GET", "/v1/sources:subscribe")
            self.assertEqual(code, 401)
            # Hostile names are refused naming the field, the echo bounded.
            for names in ("cam", "sources/a/b", "sources/" + "x" * 10000, "sources/%00"):
                code, answer = self.curl("GET", f"/v1/sources:subscribe?names={names}",
                                         token=INFERENCE_TOKEN)
                self.assertEqual(code, 400, answer)
                # The field is named first ("names", or "the query parameter names" for bytes
                # that are not text, refused at the door).
                self.assertRegex(answer["error"], r"^(the query parameter )?names", answer)
                self.assertLess(len(answer["error"]), 300)
            code, listed = self.curl("GET", "/v1/sources?filter=labels.door%3Drest",
                                     token=INFERENCE_TOKEN)
            self.assertEqual([s["name"] for s in listed["sources"]], ["sources/rest-cam"])
            code, paused = self.curl("PATCH", "/v1/sources/rest-cam?update_mask=paused",
                                     {"paused": True}, ADMIN_TOKEN)
            self.assertEqual((code, paused["status"]["state"]), (200, "PAUSED"))
            # The resume window is one of the fields an update may change (sources.md).
            code, widened = self.curl(
                "PATCH", "/v1/sources/rest-cam?update_mask=max_resume_gap_seconds",
                {"max_resume_gap_seconds": 3600}, ADMIN_TOKEN)
            self.assertEqual((code, widened.get("max_resume_gap_seconds")), (200, 3600), widened)
            # A paused source's subscriber, still open at the shutdown.
            held_open = self.subscribe_sse("sources/rest-cam", INFERENCE_TOKEN)
            code, answer = self.curl("PATCH", "/v1/sources/rest-cam?update_mask=paused",
                                     {"pausd": True}, ADMIN_TOKEN)
            self.assertEqual(code, 400)
            self.assertIn("not a JSON", answer["error"])
            code, answer = self.curl("POST", "/v1/sources?source_id=bad%2Fid", source,
                                     ADMIN_TOKEN)
            self.assertEqual(code, 400)
            self.assertIn("source_id", answer["error"])
            code, _ = self.curl("DELETE", "/v1/sources/rest-cam", token=ADMIN_TOKEN)
            self.assertEqual(code, 200)
            code, answer = self.curl("GET", "/v1/sources/rest-cam", token=INFERENCE_TOKEN)
            self.assertEqual(code, 404)
            code, answer = self.curl("PUT", "/v1/sources/rest-cam", {}, ADMIN_TOKEN)
            self.assertEqual(code, 405)
        finally:
            stop_server(server)
        # The drain ended the stream still open: curl saw its end, and nothing went wrong.
        self.assertEqual(held_open.wait(timeout=30), 0)
        held_open.stdout.close()

    def subscribe_sse(self, names, token):
        process = subprocess.Popen(
            ["curl", "-sS", "-N", "-H", f"Authorization: Bearer {token}",
             f"http://127.0.0.1:{self.http_port}/v1/sources:subscribe?names={names}"],
            stdout=subprocess.PIPE, text=True)
        self.assertEqual(process.stdout.readline(), ": subscribed\n")
        return process

    @staticmethod
    def read_sse(process):
        """The SourceUpdates of a text/event-stream, as dictionaries."""
        event = None
        for line in process.stdout:
            if line.startswith("event: "):
                event = line[len("event: "):].strip()
            elif line.startswith("data: ") and event == "update":
                yield json.loads(line[len("data: "):])


class Broker:
    """Debian's mosquitto on a loopback port, and mosquitto_sub lines ("TOPIC PAYLOAD") read on a
    thread."""

    def __init__(self):
        self.port = free_port()
        self.config = os.path.join(TMP.name, f"mosquitto-{self.port}.conf")
        with open(self.config, "w") as out:
            out.write(f"listener {self.port} 127.0.0.1\nallow_anonymous true\n"
                      "persistence false\n")
        self.process = None

    def start(self):
        self.process = subprocess.Popen(["mosquitto", "-c", self.config],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(self.listening, 10, "mosquitto to listen")
        return self

    def listening(self):
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", self.port)) == 0

    def stop(self):
        self.process.kill()
        self.process.wait()

    def subscribe(self, topic):
        """A queue that fills with (topic, JSON payload) as they are published."""
        lines = queue.Queue()
        process = subprocess.Popen(
            ["mosquitto_sub", "-h", "127.0.0.1", "-p", str(self.port), "-t", topic, "-v"],
            stdout=subprocess.PIPE, text=True)

        def read():
            with process.stdout:
                for line in process.stdout:
                    name, _, payload = line.strip().partition(" ")
                    lines.put((name, json.loads(payload)))
        threading.Thread(target=read, daemon=True).start()
        return process, lines


def stop_subscriber(process):
    process.kill()
    process.wait()


def first_on(lines, wanted, timeout=40):
    """{topic: the first payload on it that its predicate takes} for each topic of `wanted`
    ({topic: predicate}), in whatever order they come."""
    found = {}
    deadline = time.monotonic() + PATIENCE * timeout
    while len(found) < len(wanted) and time.monotonic() < deadline:
        try:
            name, payload = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            break
        if name in wanted and name not in found and wanted[name](payload):
            found[name] = payload
    missing = set(wanted) - set(found)
    if missing:
        raise AssertionError(f"nothing on {sorted(missing)} in {PATIENCE * timeout} s")
    return found


class MqttTest(unittest.TestCase):
    """Predictions, segment events and retained states on a real broker, which goes away and
    comes back."""

    def test_publishes_and_comes_back_with_the_broker(self):
        broker = Broker().start()
        camera = make_camera("/mqtt").start()
        server, port = start_server("--mqtt-url", f"mqtt://127.0.0.1:{broker.port}")
        metrics_port = start_server.metrics_port
        subscriber, lines = broker.subscribe("vidclf/#")
        try:
            client = Client(port)
            client.create("porch", camera.uri(), stall_timeout_seconds=1, config=VC.StreamConfig(
                embed_stride=5, segment_events=VC.SegmentEventOptions(
                    threshold=0.01, hysteresis=0.005, min_seconds=0.2)))
            found = first_on(lines, {
                "vidclf/porch/state": lambda state: state["state"] == "LIVE",
                "vidclf/porch/predictions": lambda prediction: True,
                "vidclf/porch/events": lambda events: True})
            self.assertGreater(len(found["vidclf/porch/predictions"]["top_k"]), 0)
            self.assertEqual(found["vidclf/porch/events"]["events"][0]["kind"], "SEGMENT_START")
            # The state is retained: a subscriber that comes later hears it at once.
            late = subprocess.run(["mosquitto_sub", "-h", "127.0.0.1", "-p", str(broker.port),
                                   "-t", "vidclf/porch/state", "-C", "1", "-W", "10"],
                                  capture_output=True, text=True, timeout=20)
            self.assertEqual(json.loads(late.stdout)["state"], "LIVE")

            # The broker goes away; predictions go on, and then the camera stalls, meanwhile;
            # the broker comes back empty.
            stop_subscriber(subscriber)
            broker.stop()

            def metrics():
                return server_fixture.http(metrics_port, "/metrics")[2].decode()
            wait_for(lambda: "vidclf_mqtt_connected 0" in metrics(), 10, "the broker to be away")
            frames = client.get("porch").status.frames
            wait_for(lambda: client.get("porch").status.frames >= frames + 10, 30, "new frames")
            camera.command("freeze")
            client.wait_state("porch", "STALLED")
            broker.start()
            subscriber, lines = broker.subscribe("vidclf/#")
            stalled = first_on(lines, {"vidclf/porch/state":
                                       lambda state: state["state"] == "STALLED"})[
                "vidclf/porch/state"]
            self.assertIn("no frame", stalled["last_error"])
            self.assertIn("vidclf_mqtt_connected 1", metrics())
            self.assertRegex(metrics(), r'vidclf_mqtt_dropped_total\{kind="prediction"\} [1-9]')
            client.delete("porch")
        finally:
            stop_subscriber(subscriber)
            stop_server(server)
            camera.kill()
            broker.stop()


    def test_publishes_over_tls_with_credentials(self):
        # A CA, and a certificate for 127.0.0.1 it signed, for the broker.
        tls = tempfile.mkdtemp(dir=TMP.name)
        ca, key, cert = (os.path.join(tls, name) for name in ("ca.pem", "key.pem", "cert.pem"))
        for command in (
                ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                 "-subj", "/CN=test CA", "-keyout", os.path.join(tls, "ca.key"), "-out", ca],
                ["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
                 "-keyout", key, "-out", os.path.join(tls, "broker.csr")],
                ["openssl", "x509", "-req", "-in", os.path.join(tls, "broker.csr"), "-CA", ca,
                 "-CAkey", os.path.join(tls, "ca.key"), "-CAcreateserial", "-days", "1",
                 "-extfile", "/dev/stdin", "-out", cert]):
            subprocess.run(command, check=True, capture_output=True,
                           input=b"subjectAltName=IP:127.0.0.1\n")
        passwords = os.path.join(tls, "passwords")
        subprocess.run(["mosquitto_passwd", "-c", "-b", passwords, "vidclf", "broker-secret"],
                       check=True, capture_output=True)
        broker = Broker()
        # Started as root, mosquitto would read its files as the mosquitto user: it stays root.
        with open(broker.config, "w") as out:
            out.write(f"listener {broker.port} 127.0.0.1\ncafile {ca}\ncertfile {cert}\n"
                      f"keyfile {key}\nallow_anonymous false\npassword_file {passwords}\n"
                      "persistence false\nuser root\n")
        broker.start()
        subscriber = subprocess.Popen(
            ["mosquitto_sub", "-h", "127.0.0.1", "-p", str(broker.port), "--cafile", ca,
             "-u", "vidclf", "-P", "broker-secret", "-t", "vidclf/+/state", "-v", "-C", "1"],
            stdout=subprocess.PIPE, text=True)
        server, port = start_server(
            "--mqtt-url", f"mqtts://vidclf:broker-secret@127.0.0.1:{broker.port}", "--mqtt-ca", ca)
        try:
            Client(port).create("tls-cam", CAMERA.uri(), paused=True)
            out, _ = subscriber.communicate(timeout=30)
            topic, _, payload = out.strip().partition(" ")
            self.assertEqual(topic, "vidclf/tls-cam/state")
            self.assertEqual(json.loads(payload)["state"], "PAUSED")
            Client(port).delete("tls-cam")
        finally:
            subscriber.kill()
            stop_server(server)
            broker.stop()

    def test_a_cold_start_ends_the_segments_announced_before(self):
        broker = Broker().start()
        camera = make_camera("/mqtt").start()
        state_dir = tempfile.mkdtemp(dir=TMP.name)
        flags = ("--mqtt-url", f"mqtt://127.0.0.1:{broker.port}", "--state-dir", state_dir)
        server, port = start_server(*flags)
        subscriber, lines = broker.subscribe("vidclf/gate/events")
        try:
            Client(port).create("gate", camera.uri(), max_resume_gap_seconds=1,
                                config=VC.StreamConfig(
                                    embed_stride=5, segment_events=VC.SegmentEventOptions(
                                        threshold=0.01, hysteresis=0.005, min_seconds=0.2)))
            started = first_on(lines, {"vidclf/gate/events": lambda events: any(
                event["kind"] == "SEGMENT_START" for event in events["events"])})[
                "vidclf/gate/events"]["events"]
            stop_server(server)
            time.sleep(2)  # past max_resume_gap_seconds: the head starts cold
            server, port = start_server(*flags)
            announced = [event for event in started if event["kind"] == "SEGMENT_START"][0]
            ended = first_on(lines, {"vidclf/gate/events": lambda events: any(
                event["kind"] == "SEGMENT_END" and event["label"] == announced["label"] and
                event.get("start_seconds", 0) == announced.get("start_seconds", 0)
                for event in events["events"])})
            self.assertTrue(ended)
            self.assertIn("started cold", Client(port).get("gate").status.resume_note)
        finally:
            stop_subscriber(subscriber)
            stop_server(server)
            camera.kill()
            broker.stop()


def process_figures(pid):
    """The threads and resident memory (MiB) of process `pid`."""
    figures = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            figures[key] = value.strip()
    return int(figures["Threads"]), int(figures["VmRSS"].split()[0]) / 1024


class ManySourcesTest(unittest.TestCase):
    """1,000 registered cameras that cannot be reached: threads bounded by --max-streams, memory
    by the registrations, and the API still answers."""

    def test_a_thousand_sources_that_cannot_connect(self):
        closed_port = free_port()  # nothing listens there
        max_streams = 32
        server, port = server_fixture.start_server(
            SERVER, REPO, "--allow-uri", f"rtsp://127.0.0.1:{closed_port}/", "--max-streams",
            str(max_streams))[:2]
        try:
            client = Client(port)
            threads_before, rss_before = process_figures(server.pid)
            for i in range(1000):
                client.create(f"dead-{i:04d}", f"rtsp://127.0.0.1:{closed_port}/cam-{i}",
                              labels={"site": f"s{i % 10}"})

            def listed():
                sources, token = [], ""
                while True:
                    page = client.list(page_size=1000, page_token=token)
                    sources += page.sources
                    token = page.next_page_token
                    if not token:
                        return sources

            most_threads = [0]

            def all_tried():
                most_threads[0] = max(most_threads[0], process_figures(server.pid)[0])
                return all(source.status.last_error for source in listed())

            # Each has tried once, to connect or for a place under --max-streams (and says why
            # it failed); the threads are counted throughout.
            wait_for(all_tried, 30, "every source to have tried once")
            threads, rss = process_figures(server.pid)
            threads = max(threads, most_threads[0])
            print(f"\n1000 unreachable sources: {threads_before} -> {threads} threads, "
                  f"{rss_before:.0f} -> {rss:.0f} MiB resident", file=sys.stderr)
            self.assertLessEqual(threads, threads_before + max_streams + 8)
            self.assertLess(rss - rss_before, 200)
            states = {}
            for source in listed():
                state = PB.SourceStatus.State.Name(source.status.state)
                states[state] = states.get(state, 0) + 1
            self.assertEqual(sum(states.values()), 1000)
            self.assertLessEqual(set(states), {"CONNECTING", "BACKING_OFF"})
            self.assertEqual(len(client.list(page_size=1000, filter="labels.site=s3").sources),
                             100)
            for i in range(1000):
                client.delete(f"dead-{i:04d}")
            wait_for(lambda: process_figures(server.pid)[0] <= threads_before + 2, 30,
                     "the sources' threads to end")
        finally:
            stop_server(server)


class RestartTest(unittest.TestCase):
    """Registrations in --state-dir, across SIGTERM and SIGKILL, with no client involved."""

    def test_sources_come_back_after_sigterm_and_sigkill(self):
        camera = make_camera("/restart").start()
        self.addCleanup(camera.kill)
        state_dir = os.path.join(TMP.name, "state")
        server, port = start_server("--state-dir", state_dir)
        client = Client(port)
        client.create("kept-a", camera.uri())
        client.create("kept-b", camera.uri(), paused=True, labels={"kept": "yes"})
        client.wait_state("kept-a", "LIVE")
        state_file = os.path.join(state_dir, "sources.json")
        self.assertEqual(os.stat(state_file).st_mode & 0o777, 0o600)
        wait_sessions(camera, 1)
        stop_server(server)  # SIGTERM: the drain lets go of the camera
        wait_sessions(camera, 0)

        server, port = start_server("--state-dir", state_dir)
        client = Client(port)
        client.wait_state("kept-a", "LIVE")
        self.assertEqual(client.get("kept-b").status.state, PB.SourceStatus.PAUSED)
        self.assertEqual(dict(client.get("kept-b").labels), {"kept": "yes"})
        server.send_signal(signal.SIGKILL)
        server.wait()
        server.stdout.close()

        server, port = start_server("--state-dir", state_dir)
        client = Client(port)
        client.wait_state("kept-a", "LIVE")
        client.delete("kept-a")
        client.delete("kept-b")
        stop_server(server)
        server, port = start_server("--state-dir", state_dir)
        self.assertEqual(list(Client(port).list().sources), [])
        stop_server(server)

    def test_a_resumed_stream_scores_as_an_uninterrupted_one(self):
        for model in ("small", "causal"):
            with self.subTest(model=model):
                self.check_continuity(model)

    def check_continuity(self, model):
        """A file played as a camera, checkpointed, the server stopped and started again: the
        predictions after the restart equal those of one uninterrupted run over the file, the
        segments open at the restart go on (not announced again, ended with their first start),
        and the source's counters go on from where they were."""
        uri = f"file://{VIDEOS}/replay.mkv"
        # A threshold every label passes at once and a bridge longer than the file: each label's
        # segment opens in the first second and ends with the file, across the restart.
        segments = VC.SegmentEventOptions(threshold=0.001, hysteresis=0, min_seconds=0.2,
                                          max_gap_seconds=60)
        config = VC.StreamConfig(model=model, top_k=10, embed_stride=2, segment_events=segments)
        state_dir = os.path.join(TMP.name, f"continuity-{model}")
        server, port = start_server("--state-dir", state_dir)
        client = Client(port)

        def scores(prediction):
            return {entry.label: entry.score for entry in prediction.top_k}

        def event_key(event):
            return (VC.SegmentEvent.Kind.Name(event.kind), event.label,
                    round(event.start_seconds, 2))

        reference, reference_events = {}, {}
        for response in client.watch(uri, config=config, max_reconnects=0):
            if response.HasField("prediction"):
                reference[response.prediction.last_frame] = scores(response.prediction)
                for event in response.prediction.events:
                    reference_events[event_key(event)] = event

        def collect(updates, until_frame=None):
            """Predictions by last frame and events, until that frame or the file's end."""
            predictions, events = {}, []
            for update in updates:
                if update.HasField("prediction"):
                    predictions[update.prediction.last_frame] = scores(update.prediction)
                    if until_frame is not None and update.prediction.last_frame >= until_frame:
                        break
                elif update.HasField("events"):
                    events += update.events.events
                elif update.status.state == PB.SourceStatus.BACKING_OFF:
                    break  # the file has ended
            updates.cancel()
            return predictions, events

        client.create("replay", uri, config=config, realtime=True, checkpoint_interval_seconds=1,
                      paused=True)
        updates = client.subscribe(["sources/replay"])
        client.update(PB.Source(name="sources/replay", paused=False), ["paused"])
        before, events_before = collect(updates, 75)
        self.assertEqual(client.get("replay").status.resumed, False)
        stop_server(server)  # the drain takes a last checkpoint

        server, port = start_server("--state-dir", state_dir)
        client = Client(port)
        after, events_after = collect(client.subscribe(["sources/replay"]))
        status = client.get("replay").status
        self.assertTrue(status.resumed, status.resume_note)
        self.assertIn("resumed after", status.resume_note)
        # Counted on from the checkpoint, not from 0: the file's 300 frames at least, though
        # those before the checkpoint were not decoded again.
        self.assertGreaterEqual(status.frames, 300)
        self.assertGreater(min(after), max(before))  # it went on, not from the first frame
        common = sorted(set(after) & set(reference))
        self.assertGreaterEqual(len(common), 10)
        for frame in common:
            for label, score in reference[frame].items():
                self.assertAlmostEqual(after[frame][label], score, delta=1e-4,
                                       msg=f"frame {frame}, {label}")
        # The segments announced before the restart end after it as they do in one run: from
        # the same start, and without a second SEGMENT_START.
        started_before = {event.label for event in events_before
                          if event.kind == VC.SegmentEvent.SEGMENT_START}
        self.assertTrue(started_before)
        ended_after = {event.label: event for event in events_after
                       if event.kind == VC.SegmentEvent.SEGMENT_END}
        for label in started_before:
            self.assertIn(label, ended_after)
            key = event_key(ended_after[label])
            self.assertIn(key, reference_events, "a segment ended after the restart that one "
                          f"run has not: {key}")
            reference_end = reference_events[key]
            self.assertAlmostEqual(ended_after[label].end_seconds, reference_end.end_seconds,
                                   delta=0.1)
        self.assertFalse([event for event in events_after
                          if event.kind == VC.SegmentEvent.SEGMENT_START and
                          event.label in started_before])
        # Everything under the state dir is the server's alone (sources.md): 0700 and 0600.
        for root, dirs, files in os.walk(state_dir):
            for name in dirs:
                self.assertEqual(os.stat(os.path.join(root, name)).st_mode & 0o777, 0o700, name)
            for name in files:
                self.assertEqual(os.stat(os.path.join(root, name)).st_mode & 0o777, 0o600, name)
        client.delete("replay")
        self.assertFalse(os.path.exists(os.path.join(state_dir, "checkpoints", "replay")))
        stop_server(server)

    def test_a_state_file_that_cannot_be_read_is_refused_and_kept(self):
        state_dir = os.path.join(TMP.name, "broken-state")
        os.makedirs(state_dir)
        state_file = os.path.join(state_dir, "sources.json")
        for content in ['{"version": 1, "sources": [', '{"version": 7, "sources": []}',
                        '{"version": 1, "sources": [{"name": "sources/x", "uri": 5}]}']:
            with open(state_file, "w") as out:
                out.write(content)
            result = subprocess.run(
                [SERVER, "--model-repository", REPO, "--grpc-port", "0", "--metrics-port", "0",
                 "--state-dir", state_dir], capture_output=True, text=True, timeout=120)
            self.assertNotEqual(result.returncode, 0)
            self.assertIn(state_file, result.stdout + result.stderr)
            with open(state_file) as kept:
                self.assertEqual(kept.read(), content)


class AdminTokenTest(unittest.TestCase):
    def test_changes_need_the_admin_token(self):
        tokens = os.path.join(TMP.name, "tokens")
        admin = os.path.join(TMP.name, "admin-tokens")
        with open(tokens, "w") as out:
            out.write(INFERENCE_TOKEN + "\n")
        with open(admin, "w") as out:
            out.write(ADMIN_TOKEN + "\n")
        server, port = start_server("--token-file", tokens, "--admin-token-file", admin)
        try:
            reader, admin_client = Client(port, INFERENCE_TOKEN), Client(port, ADMIN_TOKEN)
            with self.assertRaises(grpc.RpcError) as raised:
                reader.create("by-reader", CAMERA.uri(), paused=True)
            self.assertEqual(raised.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
            self.assertIn("admin token", raised.exception.details())
            with self.assertRaises(grpc.RpcError) as raised:
                Client(port).create("anonymous", CAMERA.uri(), paused=True)
            self.assertEqual(raised.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
            admin_client.create("by-admin", CAMERA.uri(), paused=True)
            self.assertEqual(reader.get("by-admin").name, "sources/by-admin")
            with self.assertRaises(grpc.RpcError) as raised:
                reader.delete("by-admin")
            self.assertEqual(raised.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
            admin_client.delete("by-admin")
        finally:
            stop_server(server)
        # Inference tokens without admin tokens: nobody may change sources.
        server, port = start_server("--token-file", tokens)
        try:
            with self.assertRaises(grpc.RpcError) as raised:
                Client(port, INFERENCE_TOKEN).create("none", CAMERA.uri(), paused=True)
            self.assertEqual(raised.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
            self.assertIn("--admin-token-file", raised.exception.details())
        finally:
            stop_server(server)


if __name__ == "__main__":
    unittest.main()
