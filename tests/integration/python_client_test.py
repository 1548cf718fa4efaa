#!/usr/bin/env python3
"""A second-language client: Python's grpcio against the real vidclf-server on loopback.

Checks Classify, ClassifyUpload, ListModels and GetModel, the health service, server reflection and
the /metrics page (with promtool).
Usage: python_client_test.py SERVER_BINARY TRAIN_BINARY PROTO_DIR
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import unittest
import urllib.request

import grpc

SERVER, TRAIN, PROTO_DIR = sys.argv[1:4]
del sys.argv[1:4]


def generate_messages(out_dir):
    subprocess.run(["protoc", f"--proto_path={PROTO_DIR}", f"--python_out={out_dir}",
                    "vidclf/v1/video_classifier.proto", "grpc/health/v1/health.proto"],
                   check=True)
    for package in ("vidclf", "vidclf/v1", "grpc", "grpc/health", "grpc/health/v1"):
        open(os.path.join(out_dir, package, "__init__.py"), "a").close()
    # Our generated 'grpc' package would shadow grpcio's: import the modules by path instead.
    import importlib.util

    def load(name, path):
        spec = importlib.util.spec_from_file_location(name, os.path.join(out_dir, path))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return (load("video_classifier_pb2", "vidclf/v1/video_classifier_pb2.py"),
            load("health_pb2", "grpc/health/v1/health_pb2.py"))


class PythonClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.pb, cls.health_pb = generate_messages(cls.tmp.name)
        repo = os.path.join(cls.tmp.name, "repo")
        samples = os.path.join(cls.tmp.name, "samples")
        # A tiny, quickly trained bundle; its held-out samples are our test videos.
        subprocess.run([TRAIN, "--output-repository", repo, "--name", "small", "--samples-dir",
                        samples, "--videos-per-class", "4", "--epochs", "2", "--num-frames", "4",
                        "--crop-size", "32", "--resize-shorter-side", "32"],
                       check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(samples, "fade_in.mp4"), "rb") as video:
            cls.video = video.read()
        cls.server = subprocess.Popen(
            [SERVER, "--model-repository", repo, "--host", "127.0.0.1", "--grpc-port", "0",
             "--metrics-port", "0"], stdout=subprocess.PIPE, text=True)
        output = ""
        while not ("gRPC listening" in output and "metrics on" in output):
            # Blocks until the server prints or exits; ctest's timeout bounds a hang.
            line = cls.server.stdout.readline()
            if not line:
                raise RuntimeError(f"server did not start; it printed:\n{output}")
            output += line
        cls.grpc_port = int(re.search(r"gRPC listening on [\d.]+:(\d+)", output).group(1))
        cls.metrics_port = int(re.search(r"metrics on http://[\d.]+:(\d+)/", output).group(1))
        cls.channel = grpc.insecure_channel(f"127.0.0.1:{cls.grpc_port}")

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.server.send_signal(signal.SIGTERM)
        assert cls.server.wait(timeout=30) == 0, "server did not shut down cleanly"
        cls.tmp.cleanup()

    def classify(self, request):
        call = self.channel.unary_unary(
            "/vidclf.v1.VideoClassifier/Classify",
            request_serializer=self.pb.ClassifyRequest.SerializeToString,
            response_deserializer=self.pb.ClassifyResponse.FromString)
        return call(request, timeout=60)

    def test_classify(self):
        response = self.classify(self.pb.ClassifyRequest(video=self.video, top_k=4))
        self.assertEqual(response.model, "small")
        self.assertEqual(sorted(e.label for e in response.top_k),
                         ["fade_in", "fade_out", "hue_backward", "hue_forward"])
        self.assertAlmostEqual(sum(e.score for e in response.top_k), 1.0, places=5)
        self.assertEqual(response.frames_used, 4)
        self.assertEqual(len(response.frame_timestamps_seconds), 4)

    def upload(self, messages, timeout=60):
        call = self.channel.stream_unary(
            "/vidclf.v1.VideoClassifier/ClassifyUpload",
            request_serializer=self.pb.ClassifyUploadRequest.SerializeToString,
            response_deserializer=self.pb.ClassifyResponse.FromString)
        return call.future(messages, timeout=timeout)

    def chunks(self, data, size):
        return (self.pb.ClassifyUploadRequest(chunk=data[i:i + size])
                for i in range(0, len(data), size))

    def test_upload_scores_as_classify(self):
        expected = self.classify(self.pb.ClassifyRequest(video=self.video, top_k=4))
        settings = self.pb.ClassifyUploadRequest(settings=self.pb.ClassifyRequest(top_k=4))
        response = self.upload(iter([settings, *self.chunks(self.video, 1000)])).result()
        self.assertEqual([e.label for e in response.top_k], [e.label for e in expected.top_k])
        for got, want in zip(response.top_k, expected.top_k):
            self.assertAlmostEqual(got.score, want.score, places=5)
        self.assertEqual(list(response.frame_timestamps_seconds),
                         list(expected.frame_timestamps_seconds))

    def test_upload_is_answered_before_it_ends(self):
        # A 10 s Matroska stream; the client sends its first half and then waits, as a camera
        # would, until the answer has come. Three frames are settled long before that.
        mkv = os.path.join(self.tmp.name, "long.mkv")
        subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                        "testsrc2=size=160x120:rate=25", "-t", "10", "-c:v", "libx264", mkv],
                       check=True)
        with open(mkv, "rb") as video:
            data = video.read()
        answered = threading.Event()
        upload_ended = threading.Event()

        def messages():
            sampling = self.pb.SamplingOptions(strategy="window", num_frames=3)
            yield self.pb.ClassifyUploadRequest(
                settings=self.pb.ClassifyRequest(sampling=sampling))
            yield from self.chunks(data[:len(data) // 2], 4096)
            # Waits for the answer; a server that waited for the end of the upload gets it
            # after 20 s, with the upload over.
            answered.wait(timeout=20)
            upload_ended.set()

        future = self.upload(messages())
        try:
            response = future.result(timeout=60)
            self.assertFalse(upload_ended.is_set(), "the answer came only once the upload ended")
        finally:
            answered.set()
        self.assertEqual(response.frames_used, 3)
        self.assertEqual([round(t, 3) for t in response.frame_timestamps_seconds],
                         [0.0, 0.04, 0.08])

    def test_stream_classify(self):
        # A feed of 20 MPEG-TS frames, then the end of the feed: one prediction per frame, in
        # frame order, the last one for all 20 (none dropped: this client reads as they come).
        ts = os.path.join(self.tmp.name, "feed.ts")
        subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                        "testsrc2=size=160x120:rate=25", "-frames:v", "20", "-c:v", "libx264",
                        "-f", "mpegts", ts], check=True)
        with open(ts, "rb") as feed:
            data = feed.read()
        call = self.channel.stream_stream(
            "/vidclf.v1.VideoClassifier/StreamClassify",
            request_serializer=self.pb.StreamClassifyRequest.SerializeToString,
            response_deserializer=self.pb.StreamPrediction.FromString)
        config = self.pb.StreamConfig(top_k=2, input=self.pb.StreamConfig.CONTAINER)
        messages = [self.pb.StreamClassifyRequest(config=config)]
        messages += [self.pb.StreamClassifyRequest(chunk=data[i:i + 2000])
                     for i in range(0, len(data), 2000)]
        predictions = list(call(iter(messages), timeout=60))
        self.assertEqual(sum(p.dropped_before for p in predictions) + len(predictions), 20)
        self.assertEqual([p.last_frame for p in predictions],
                         sorted({p.last_frame for p in predictions}))
        last = predictions[-1]
        self.assertEqual((last.model, last.first_frame, last.last_frame), ("small", 0, 19))
        self.assertEqual((last.frames_seen, last.frames_embedded), (20, 20))
        self.assertEqual(len(last.top_k), 2)
        self.assertGreaterEqual(last.latency_ms, 0)

        # A config that names no input kind is refused with a message that says so.
        with self.assertRaises(grpc.RpcError) as refused:
            list(call(iter([self.pb.StreamClassifyRequest(config=self.pb.StreamConfig())]),
                      timeout=60))
        self.assertEqual(refused.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("input", refused.exception.details())

    def test_upload_errors(self):
        with self.assertRaises(grpc.RpcError) as error:
            self.upload(iter([])).result()
        self.assertEqual(error.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        with self.assertRaises(grpc.RpcError) as error:
            bad = self.pb.ClassifyUploadRequest(settings=self.pb.ClassifyRequest(video=b"x"))
            self.upload(iter([bad])).result()
        self.assertEqual(error.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("cannot carry a video", error.exception.details())

    def test_invalid_argument_then_serving(self):
        with self.assertRaises(grpc.RpcError) as error:
            self.classify(self.pb.ClassifyRequest(video=b"\x00" * 1000))
        self.assertEqual(error.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("not a video container", error.exception.details())
        self.assertEqual(self.classify(self.pb.ClassifyRequest(video=self.video)).model, "small")

    def test_list_and_get_models(self):
        list_models = self.channel.unary_unary(
            "/vidclf.v1.VideoClassifier/ListModels",
            request_serializer=self.pb.ListModelsRequest.SerializeToString,
            response_deserializer=self.pb.ListModelsResponse.FromString)
        listed = list_models(self.pb.ListModelsRequest(), timeout=10)
        self.assertEqual([m.name for m in listed.models], ["small"])
        self.assertEqual(listed.default_model, "small")
        model = listed.models[0]
        self.assertEqual(model.head, "gru")
        self.assertEqual(model.input.num_frames, 4)
        self.assertEqual(model.streaming.mode, "recurrent")
        self.assertEqual(list(model.labels),
                         ["fade_in", "fade_out", "hue_forward", "hue_backward"])
        get_model = self.channel.unary_unary(
            "/vidclf.v1.VideoClassifier/GetModel",
            request_serializer=self.pb.GetModelRequest.SerializeToString,
            response_deserializer=self.pb.ModelInfo.FromString)
        self.assertEqual(get_model(self.pb.GetModelRequest(), timeout=10).name, "small")
        with self.assertRaises(grpc.RpcError) as error:
            get_model(self.pb.GetModelRequest(name="nope"), timeout=10)
        self.assertEqual(error.exception.code(), grpc.StatusCode.NOT_FOUND)

    def test_health(self):
        check = self.channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=self.health_pb.HealthCheckRequest.SerializeToString,
            response_deserializer=self.health_pb.HealthCheckResponse.FromString)
        response = check(self.health_pb.HealthCheckRequest(), timeout=10)
        self.assertEqual(response.status, self.health_pb.HealthCheckResponse.SERVING)

    def test_reflection_lists_the_service(self):
        # ServerReflectionRequest{list_services: ""} is field 7, an empty string: bytes 3a 00.
        info = self.channel.stream_stream(
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
            request_serializer=lambda raw: raw, response_deserializer=lambda raw: raw)
        responses = list(info(iter([b"\x3a\x00"]), timeout=10))
        self.assertEqual(len(responses), 1)
        self.assertIn(b"vidclf.v1.VideoClassifier", responses[0])
        self.assertIn(b"grpc.health.v1.Health", responses[0])

    def test_metrics_pass_promtool(self):
        self.classify(self.pb.ClassifyRequest(video=self.video))
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        page = urllib.request.urlopen(url, timeout=10).read()
        self.assertIn(b'vidclf_requests_total{code="OK",method="Classify",model="small"}', page)
        self.assertIn(b'vidclf_stage_duration_seconds_bucket{model="small",stage="embed"', page)
        lint = subprocess.run(["promtool", "check", "metrics"], input=page, capture_output=True)
        self.assertEqual(lint.returncode, 0, lint.stdout + lint.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
