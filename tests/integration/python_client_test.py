#!/usr/bin/env python3
"""A second-language client: Python's grpcio against the real vidclf-server on loopback.

Checks Classify, ClassifyUpload, ListModels and GetModel, the health service, server reflection and
the /metrics page (with promtool); the Open Inference Protocol (inference.GRPCInferenceService)
with requests built as tritonclient builds them, its answers against vidclf.v1's and its
readiness during a drain; then mutual TLS and a bearer token on another server.
Usage: python_client_test.py SERVER_BINARY TRAIN_BINARY PROTO_DIR
"""
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

import grpc

import server_fixture
from server_fixture import http, stop_server

SERVER, TRAIN, PROTO_DIR = sys.argv[1:4]
del sys.argv[1:4]


def generate_messages(out_dir):
    subprocess.run(["protoc", f"--proto_path={PROTO_DIR}", f"--python_out={out_dir}",
                    "vidclf/v1/video_classifier.proto", "inference/grpc_service.proto",
                    "grpc/health/v1/health.proto"],
                   check=True)
    for package in ("vidclf", "vidclf/v1", "inference", "grpc", "grpc/health", "grpc/health/v1"):
        open(os.path.join(out_dir, package, "__init__.py"), "a").close()
    # Our generated 'grpc' package would shadow grpcio's: import the modules by path instead.
    import importlib.util

    def load(name, path):
        spec = importlib.util.spec_from_file_location(name, os.path.join(out_dir, path))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return (load("video_classifier_pb2", "vidclf/v1/video_classifier_pb2.py"),
            load("grpc_service_pb2", "inference/grpc_service_pb2.py"),
            load("health_pb2", "grpc/health/v1/health_pb2.py"))

# The synthetic benchmark's classes, in label order.
LABELS = ["fade_in", "fade_out", "hue_forward", "hue_backward", "zoom_in", "zoom_out",
          "flicker_slow", "flicker_fast", "focus_in", "focus_out"]


def setUpModule():
    global TMP, PB, V2_PB, HEALTH_PB, REPO, VIDEO
    TMP = tempfile.TemporaryDirectory()
    PB, V2_PB, HEALTH_PB = generate_messages(TMP.name)
    REPO, sample = server_fixture.train_small_repository(TRAIN, TMP.name)
    with open(sample, "rb") as video:
        VIDEO = video.read()


def tearDownModule():
    TMP.cleanup()


def start_server(*flags):
    return server_fixture.start_server(SERVER, REPO, *flags)


def list_services(channel, metadata=None):
    """Server reflection's list of services, as raw bytes."""
    # ServerReflectionRequest{list_services: ""} is field 7, an empty string: bytes 3a 00.
    info = channel.stream_stream(
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        request_serializer=lambda raw: raw, response_deserializer=lambda raw: raw)
    responses = list(info(iter([b"\x3a\x00"]), timeout=10, metadata=metadata))
    assert len(responses) == 1
    return responses[0]


class PythonClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pb, cls.health_pb, cls.video = PB, HEALTH_PB, VIDEO
        cls.server, cls.grpc_port, cls.metrics_port = start_server()
        cls.channel = grpc.insecure_channel(f"127.0.0.1:{cls.grpc_port}")

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        stop_server(cls.server)

    def classify(self, request):
        call = self.channel.unary_unary(
            "/vidclf.v1.VideoClassifier/Classify",
            request_serializer=self.pb.ClassifyRequest.SerializeToString,
            response_deserializer=self.pb.ClassifyResponse.FromString)
        return call(request, timeout=60)

    def test_classify(self):
        response = self.classify(self.pb.ClassifyRequest(video=self.video, top_k=10))
        self.assertEqual(response.model, "small")
        self.assertEqual(sorted(e.label for e in response.top_k), sorted(LABELS))
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
        mkv = os.path.join(TMP.name, "long.mkv")
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
        ts = os.path.join(TMP.name, "feed.ts")
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
        self.assertEqual(list(model.labels), LABELS)
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
        services = list_services(self.channel)
        self.assertIn(b"vidclf.v1.VideoClassifier", services)
        self.assertIn(b"grpc.health.v1.Health", services)

    def test_metrics_pass_promtool(self):
        self.classify(self.pb.ClassifyRequest(video=self.video))
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        page = urllib.request.urlopen(url, timeout=10).read()
        self.assertIn(b'vidclf_requests_total{code="OK",method="Classify",model="small"}', page)
        self.assertIn(b'vidclf_stage_duration_seconds_bucket{model="small",stage="embed"', page)
        lint = subprocess.run(["promtool", "check", "metrics"], input=page, capture_output=True)
        self.assertEqual(lint.returncode, 0, lint.stdout + lint.stderr)


def v2_method(channel, name, response_type):
    """A method of inference.GRPCInferenceService, its request serialized by the caller's type."""
    return channel.unary_unary(f"/inference.GRPCInferenceService/{name}",
                               request_serializer=lambda request: request.SerializeToString(),
                               response_deserializer=response_type.FromString)


def bytes_elements(*elements):
    """A BYTES tensor's raw contents as tritonclient serializes them: each element's length as 4
    little-endian bytes, then the element."""
    return b"".join(struct.pack("<I", len(e)) + e for e in elements)


def infer_request(video, model="small", **parameters):
    """ModelInfer for `video` as tritonclient's InferInput("VIDEO", [1], "BYTES") with
    set_data_from_numpy sends it: the tensor's data in raw_input_contents."""
    request = V2_PB.ModelInferRequest(model_name=model, id="request-7")
    request.inputs.add(name="VIDEO", datatype="BYTES", shape=[1])
    request.raw_input_contents.append(bytes_elements(video))
    for name, value in parameters.items():
        if isinstance(value, str):
            request.parameters[name].string_param = value
        else:
            request.parameters[name].int64_param = value
    return request


def outputs_of(response):
    """A ModelInferResponse's outputs by name, decoded from raw_output_contents."""
    decoded = {}
    for output, raw in zip(response.outputs, response.raw_output_contents):
        if output.datatype == "BYTES":
            values, at = [], 0
            while at < len(raw):
                (length,) = struct.unpack_from("<I", raw, at)
                values.append(raw[at + 4:at + 4 + length].decode())
                at += 4 + length
        else:
            values = list(struct.unpack(f"<{len(raw) // 4}f", raw))
        assert len(values) == output.shape[0], (output.name, values, output.shape)
        decoded[output.name] = values
    return decoded


class InferenceProtocolTest(unittest.TestCase):
    """The Open Inference Protocol's gRPC service from a client built from its .proto alone."""

    @classmethod
    def setUpClass(cls):
        cls.server, grpc_port, cls.metrics_port = start_server()
        cls.channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
        cls.infer = v2_method(cls.channel, "ModelInfer", V2_PB.ModelInferResponse)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        stop_server(cls.server)

    def call(self, name, response_type, request):
        return v2_method(self.channel, name, response_type)(request, timeout=10)

    def test_health_metadata_and_index(self):
        self.assertTrue(self.call("ServerLive", V2_PB.ServerLiveResponse,
                                  V2_PB.ServerLiveRequest()).live)
        self.assertTrue(self.call("ServerReady", V2_PB.ServerReadyResponse,
                                  V2_PB.ServerReadyRequest()).ready)
        model_ready = lambda **request: self.call("ModelReady", V2_PB.ModelReadyResponse,
                                                  V2_PB.ModelReadyRequest(**request)).ready
        self.assertTrue(model_ready(name="small"))
        self.assertTrue(model_ready(name="small", version="1"))
        self.assertFalse(model_ready(name="small", version="2"))
        self.assertFalse(model_ready(name="nope"))
        server = self.call("ServerMetadata", V2_PB.ServerMetadataResponse,
                           V2_PB.ServerMetadataRequest())
        self.assertEqual(server.name, "vidclf")
        self.assertIn("parameters", server.extensions)
        model = self.call("ModelMetadata", V2_PB.ModelMetadataResponse,
                          V2_PB.ModelMetadataRequest(name="small"))
        self.assertEqual((model.name, list(model.versions)), ("small", ["1"]))
        self.assertEqual([(t.name, t.datatype, list(t.shape)) for t in model.inputs],
                         [("VIDEO", "BYTES", [1]), ("URI", "BYTES", [1])])
        self.assertEqual([(t.name, t.datatype) for t in model.outputs],
                         [("LABELS", "BYTES"), ("SCORES", "FP32"), ("FRAME_TIMES", "FP32")])
        for request in (V2_PB.ModelMetadataRequest(name="nope"),
                        V2_PB.ModelMetadataRequest(name="small", version="2")):
            with self.assertRaises(grpc.RpcError) as error:
                self.call("ModelMetadata", V2_PB.ModelMetadataResponse, request)
            self.assertEqual(error.exception.code(), grpc.StatusCode.NOT_FOUND)
        index = self.call("RepositoryIndex", V2_PB.RepositoryIndexResponse,
                          V2_PB.RepositoryIndexRequest())
        self.assertEqual([(m.name, m.version, m.state) for m in index.models],
                         [("small", "1", "READY")])

    def test_model_config(self):
        config = self.call("ModelConfig", V2_PB.ModelConfigResponse,
                           V2_PB.ModelConfigRequest(name="small")).config
        self.assertEqual((config.name, config.platform, config.max_batch_size),
                         ("small", "vidclf", 0))
        self.assertEqual([(i.name, i.data_type, list(i.dims), i.optional) for i in config.input],
                         [("VIDEO", V2_PB.TYPE_STRING, [1], True),
                          ("URI", V2_PB.TYPE_STRING, [1], True)])
        self.assertEqual([(o.name, o.data_type) for o in config.output],
                         [("LABELS", V2_PB.TYPE_STRING), ("SCORES", V2_PB.TYPE_FP32),
                          ("FRAME_TIMES", V2_PB.TYPE_FP32)])
        self.assertEqual(config.dynamic_batching.max_queue_delay_microseconds, 2000)
        self.assertFalse(config.model_transaction_policy.decoupled)
        with self.assertRaises(grpc.RpcError) as error:
            self.call("ModelConfig", V2_PB.ModelConfigResponse,
                      V2_PB.ModelConfigRequest(name="nope"))
        self.assertEqual(error.exception.code(), grpc.StatusCode.NOT_FOUND)

    def test_model_statistics_count_calls(self):
        statistics = lambda: self.call("ModelStatistics", V2_PB.ModelStatisticsResponse,
                                       V2_PB.ModelStatisticsRequest(name="small")).model_stats[0]
        before = statistics()
        self.infer(infer_request(VIDEO), timeout=60)
        with self.assertRaises(grpc.RpcError):
            self.infer(infer_request(b"\x00" * 1000), timeout=60)
        after = statistics()
        self.assertEqual((after.name, after.version), ("small", "1"))
        self.assertEqual(after.inference_count, before.inference_count + 1)
        stats, was = after.inference_stats, before.inference_stats
        self.assertEqual(stats.success.count, was.success.count + 1)
        self.assertEqual(stats.fail.count, was.fail.count + 1)
        for duration in ("success", "queue", "compute_input", "compute_infer"):
            self.assertGreater(getattr(stats, duration).ns, getattr(was, duration).ns, duration)
        self.assertLess(abs(after.last_inference / 1000 - time.time()), 60)
        every = self.call("ModelStatistics", V2_PB.ModelStatisticsResponse,
                          V2_PB.ModelStatisticsRequest())
        self.assertEqual([m.name for m in every.model_stats], ["small"])

    def test_infer_answers_as_classify(self):
        classify = self.channel.unary_unary(
            "/vidclf.v1.VideoClassifier/Classify",
            request_serializer=PB.ClassifyRequest.SerializeToString,
            response_deserializer=PB.ClassifyResponse.FromString)
        expected = classify(PB.ClassifyRequest(video=VIDEO, top_k=3), timeout=60)
        response = self.infer(infer_request(VIDEO, top_k=3), timeout=60)
        self.assertEqual((response.model_name, response.model_version, response.id),
                         ("small", "1", "request-7"))
        outputs = outputs_of(response)
        self.assertEqual(outputs["LABELS"], [e.label for e in expected.top_k])
        for got, want in zip(outputs["SCORES"], [e.score for e in expected.top_k]):
            self.assertAlmostEqual(got, want, places=5)
        for got, want in zip(outputs["FRAME_TIMES"], expected.frame_timestamps_seconds):
            self.assertAlmostEqual(got, want, places=5)
        self.assertEqual(len(outputs["FRAME_TIMES"]), 4)
        self.assertGreater(response.parameters["total_ms"].double_param, 0)
        page = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                      timeout=10).read()
        self.assertIn(b'vidclf_requests_total{code="OK",method="ModelInfer",model="small"}', page)

    def test_infer_takes_each_encoding_of_the_video(self):
        # UINT8 raw, one element per byte; BYTES and UINT8 in contents; two outputs asked for,
        # answered in the order asked.
        uint8_raw = V2_PB.ModelInferRequest(model_name="small")
        uint8_raw.inputs.add(name="VIDEO", datatype="UINT8", shape=[len(VIDEO)])
        uint8_raw.raw_input_contents.append(VIDEO)
        bytes_contents = V2_PB.ModelInferRequest()  # no model_name: the default model
        video = bytes_contents.inputs.add(name="VIDEO", datatype="BYTES", shape=[1])
        video.contents.bytes_contents.append(VIDEO)
        uint8_contents = V2_PB.ModelInferRequest(model_name="small")
        video = uint8_contents.inputs.add(name="VIDEO", datatype="UINT8", shape=[len(VIDEO)])
        video.contents.uint_contents.extend(VIDEO)
        expected = outputs_of(self.infer(infer_request(VIDEO), timeout=60))
        for request in (uint8_raw, bytes_contents, uint8_contents):
            request.outputs.add(name="SCORES")
            request.outputs.add(name="LABELS")
            response = self.infer(request, timeout=60)
            self.assertEqual([o.name for o in response.outputs], ["SCORES", "LABELS"])
            self.assertEqual(outputs_of(response)["LABELS"], expected["LABELS"])

    def test_bad_requests_are_refused_and_serving_goes_on(self):
        def request(change):
            bad = infer_request(VIDEO)
            change(bad)
            return bad

        def retype(r, datatype):
            r.inputs[0].datatype = datatype

        cases = [
            (V2_PB.ModelInferRequest(model_name="small"), "one input"),
            (request(lambda r: r.inputs[0].__setattr__("name", "FRAMES")),
             "unknown input 'FRAMES'"),
            (request(lambda r: retype(r, "FP32")), "must be BYTES"),
            (request(lambda r: r.inputs[0].shape.__setitem__(0, 2)), "send one video per request"),
            (request(lambda r: r.inputs[0].shape.__setitem__(0, -1)), "not -1"),
            (request(lambda r: r.raw_input_contents.__setitem__(0, VIDEO)), "length prefix"),
            (request(lambda r: r.raw_input_contents.append(b"")), "one input"),
            (request(lambda r: r.inputs[0].contents.bytes_contents.append(VIDEO)),
             "both contents and raw_input_contents"),
            (request(lambda r: retype(r, "UINT8")), "give the file's size as its shape"),
            (request(lambda r: r.parameters["colour"].__setattr__("string_param", "red")),
             "unknown request parameter 'colour'"),
            (request(lambda r: r.parameters["top_k"].__setattr__("string_param", "3")),
             "top_k must be an integer"),
            (request(lambda r: r.parameters["top_k"].__setattr__("int64_param", 0)),
             "top_k is 0"),
            (request(lambda r: r.parameters["sampling"].__setattr__("string_param", "random")),
             "random"),
            (request(lambda r: r.parameters["frames_per_second"].__setattr__(
                "double_param", float("nan"))), "frames_per_second must be a finite number"),
            (request(lambda r: r.outputs.add(name="EMBEDDINGS")), "unknown output 'EMBEDDINGS'"),
            (infer_request(b"\x00" * 1000), "not a video container"),
            (infer_request(b""), "empty input"),
        ]
        for bad, message in cases:
            with self.subTest(message=message):
                with self.assertRaises(grpc.RpcError) as error:
                    self.infer(bad, timeout=60)
                self.assertEqual(error.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
                self.assertIn(message, error.exception.details())
        for bad, code in ((infer_request(VIDEO, model="nope"), grpc.StatusCode.NOT_FOUND),
                          (request(lambda r: r.__setattr__("model_version", "2")),
                           grpc.StatusCode.NOT_FOUND)):
            with self.assertRaises(grpc.RpcError) as error:
                self.infer(bad, timeout=60)
            self.assertEqual(error.exception.code(), code)
        # Past the server's 64 MiB upload limit (and its message limit, 1 MiB above it).
        with self.assertRaises(grpc.RpcError) as error:
            self.infer(infer_request(VIDEO + bytes(66 << 20)), timeout=60)
        self.assertEqual(error.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        uri = V2_PB.ModelInferRequest(model_name="small")
        uri.inputs.add(name="URI", datatype="BYTES", shape=[1])
        uri.raw_input_contents.append(bytes_elements(b"file:///etc/passwd"))
        with self.assertRaises(grpc.RpcError) as error:
            self.infer(uri, timeout=60)
        self.assertEqual(error.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
        self.assertNotIn("root:", error.exception.details())
        garbage = self.channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
        with self.assertRaises(grpc.RpcError) as error:
            garbage(b"\xff\xff\xff", timeout=10)
        self.assertEqual(error.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("inference.ModelInferRequest", error.exception.details())
        self.assertEqual(self.infer(infer_request(VIDEO), timeout=60).model_name, "small")


def feed_request(sequence_id, chunk, name="VIDEO", start=False, end=False, **parameters):
    """One ModelStreamInfer request as tritonclient's async_stream_infer sends one of a
    sequence: the sequence in parameters, the data in raw_input_contents."""
    request = V2_PB.ModelInferRequest(model_name="small", id=f"{sequence_id}-{len(chunk)}")
    if isinstance(sequence_id, str):
        request.parameters["sequence_id"].string_param = sequence_id
    else:
        request.parameters["sequence_id"].int64_param = sequence_id
    request.parameters["sequence_start"].bool_param = start
    request.parameters["sequence_end"].bool_param = end
    for key, value in parameters.items():
        request.parameters[key].int64_param = value
    if chunk is not None:
        request.inputs.add(name=name, datatype="BYTES", shape=[1])
        request.raw_input_contents.append(bytes_elements(chunk))
    return request


class InferenceProtocolStreamTest(unittest.TestCase):
    """ModelStreamInfer's live feeds against StreamClassify's on the same feed."""

    @classmethod
    def setUpClass(cls):
        cls.server, grpc_port, _ = start_server()
        cls.channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
        ts = os.path.join(TMP.name, "v2-feed.ts")
        subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                        "testsrc2=size=160x120:rate=25", "-frames:v", "20", "-c:v", "libx264",
                        "-f", "mpegts", ts], check=True)
        with open(ts, "rb") as feed:
            data = feed.read()
        cls.chunks = [data[i:i + 2000] for i in range(0, len(data), 2000)]

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        stop_server(cls.server)

    def stream(self, requests):
        call = self.channel.stream_stream(
            "/inference.GRPCInferenceService/ModelStreamInfer",
            request_serializer=V2_PB.ModelInferRequest.SerializeToString,
            response_deserializer=V2_PB.ModelStreamInferResponse.FromString)
        return list(call(iter(requests), timeout=60))

    def sequence(self, sequence_id):
        last = len(self.chunks) - 1
        return [feed_request(sequence_id, chunk, start=i == 0, end=i == last,
                             **({"top_k": 2} if i == 0 else {}))
                for i, chunk in enumerate(self.chunks)]

    def stream_classify_last(self):
        call = self.channel.stream_stream(
            "/vidclf.v1.VideoClassifier/StreamClassify",
            request_serializer=PB.StreamClassifyRequest.SerializeToString,
            response_deserializer=PB.StreamPrediction.FromString)
        config = PB.StreamConfig(top_k=2, input=PB.StreamConfig.CONTAINER)
        messages = [PB.StreamClassifyRequest(config=config)]
        messages += [PB.StreamClassifyRequest(chunk=chunk) for chunk in self.chunks]
        return list(call(iter(messages), timeout=60))[-1]

    def predictions_of(self, responses, sequence):
        key = lambda p: p.string_param or p.int64_param
        return [r.infer_response for r in responses
                if key(r.infer_response.parameters["sequence_id"]) == sequence]

    def check_sequence(self, answers, expected, requests):
        *predictions, end = answers
        self.assertTrue(end.parameters["sequence_end"].bool_param)
        self.assertEqual(end.id, requests[-1].id)
        last = predictions[-1]
        parameters = last.parameters
        self.assertEqual((parameters["first_frame"].int64_param,
                          parameters["last_frame"].int64_param,
                          parameters["frames_seen"].int64_param), (0, 19, 20))
        self.assertEqual(sum(p.parameters["dropped_before"].int64_param for p in predictions)
                         + len(predictions), 20)
        outputs = outputs_of(last)
        self.assertEqual(outputs["LABELS"], [e.label for e in expected.top_k])
        for got, want in zip(outputs["SCORES"], [e.score for e in expected.top_k]):
            self.assertAlmostEqual(got, want, places=4)
        ids = [r.id for r in requests]
        self.assertTrue(all(p.id in ids for p in predictions), [p.id for p in predictions])

    def test_a_sequence_predicts_as_stream_classify(self):
        expected = self.stream_classify_last()
        requests = self.sequence(7)
        responses = self.stream(requests)
        self.assertEqual([r.error_message for r in responses if r.error_message], [])
        self.check_sequence(self.predictions_of(responses, 7), expected, requests)

    def test_sequences_share_a_call(self):
        expected = self.stream_classify_last()
        first, second = self.sequence(1), self.sequence("cam-b")
        interleaved = [r for pair in zip(first, second) for r in pair]
        responses = self.stream(interleaved)
        self.assertEqual([r.error_message for r in responses if r.error_message], [])
        self.check_sequence(self.predictions_of(responses, 1), expected, first)
        self.check_sequence(self.predictions_of(responses, "cam-b"), expected, second)

    def test_bad_requests_answer_errors_and_the_call_goes_on(self):
        no_sequence = feed_request(3, self.chunks[0], start=True)
        del no_sequence.parameters["sequence_id"]
        requests = [
            no_sequence,
            feed_request(4, self.chunks[0]),  # never started
            feed_request(5, b"not a picture", name="IMAGE", start=True),
            feed_request(6, self.chunks[0], name="FRAMES", start=True),
            feed_request(8, self.chunks[0], start=True),
            feed_request(8, self.chunks[1], start=True),  # started twice
            feed_request(8, self.chunks[2], top_k=3),  # head options after the start
            feed_request("x" * 200, self.chunks[0], start=True),
        ] + self.sequence(9)
        responses = self.stream(requests)
        errors = [r.error_message for r in responses if r.error_message]
        for message in ("needs the request parameter sequence_id",
                        "sequence 4 is not open", "sequence 5: INVALID_ARGUMENT",
                        "unknown input 'FRAMES'", "sequence 8 is open already",
                        "set by the request that starts a sequence", "string of 1 to 128 bytes"):
            self.assertTrue(any(message in error for error in errors), (message, errors))
        # Sequence 8, left open, ends with the call; sequence 9 is answered whole.
        self.check_sequence(self.predictions_of(responses, 9), self.stream_classify_last(),
                            requests[-len(self.chunks):])


class HttpFrontDoorTest(unittest.TestCase):
    """The Open Inference Protocol's REST endpoints and the plain upload, from curl and urllib."""

    @classmethod
    def setUpClass(cls):
        cls.allowed = os.path.join(TMP.name, "http-allowed")
        os.makedirs(cls.allowed, exist_ok=True)
        cls.clip = os.path.join(cls.allowed, "clip.mp4")
        with open(cls.clip, "wb") as clip:
            clip.write(VIDEO)
        cls.server, cls.grpc_port, cls.metrics_port, cls.port = start_server(
            "--http-port", "0", "--max-upload-mib", "2", "--http-body-timeout-s", "2",
            "--allow-uri",
            f"file://{cls.allowed}/")
        cls.channel = grpc.insecure_channel(f"127.0.0.1:{cls.grpc_port}")
        classify = cls.channel.unary_unary(
            "/vidclf.v1.VideoClassifier/Classify",
            request_serializer=PB.ClassifyRequest.SerializeToString,
            response_deserializer=PB.ClassifyResponse.FromString)
        cls.expected = classify(PB.ClassifyRequest(video=VIDEO, top_k=3), timeout=60)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        stop_server(cls.server)

    def check_labels(self, labels, scores):
        self.assertEqual(labels, [e.label for e in self.expected.top_k])
        for got, want in zip(scores, [e.score for e in self.expected.top_k]):
            self.assertAlmostEqual(got, want, places=5)

    def test_the_python_examples_answer_as_classify_does(self):
        """client/python/'s two examples, as docs/other-languages.md runs them: grpcio with the
        stubs the build generates (VIDCLF_PYTHON_STUBS, build/python), and urllib."""
        examples = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "client",
                                "python")
        runs = {
            "classify_grpc.py": (["--server", f"127.0.0.1:{self.grpc_port}"],
                                 dict(os.environ, PYTHONPATH=os.environ["VIDCLF_PYTHON_STUBS"])),
            "classify_rest.py": (["--url", f"http://127.0.0.1:{self.port}", "--model", "small"],
                                 os.environ)}
        for example, (flags, env) in runs.items():
            with self.subTest(example=example):
                result = subprocess.run(
                    [sys.executable, os.path.join(examples, example), self.clip, *flags],
                    capture_output=True, text=True, env=env, timeout=120)
                self.assertEqual(result.returncode, 0, result.stderr)
                lines = result.stdout.splitlines()
                self.assertEqual(lines[0], f"small 1: {self.expected.frames_used} frames")
                self.assertEqual([line.split()[0] for line in lines[1:]],
                                 [entry.label for entry in self.expected.top_k])
                for line, entry in zip(lines[1:], self.expected.top_k):
                    # Printed to four decimals.
                    self.assertAlmostEqual(float(line.split()[1]), entry.score, delta=6e-5)
        # A file that is no video: the REST example says what the server said.
        result = subprocess.run(
            [sys.executable, os.path.join(examples, "classify_rest.py"), __file__, "--url",
             f"http://127.0.0.1:{self.port}", "--model", "small"],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(result.returncode, 1)
        self.assertIn("HTTP 400: input is not a video", result.stderr)
        # The gRPC example says it in one line too, for a file that is no video, a server that
        # is not there and a file that is not there; never a traceback.
        grpc_example = os.path.join(examples, "classify_grpc.py")
        stubs = dict(os.environ, PYTHONPATH=os.environ["VIDCLF_PYTHON_STUBS"])
        with socket.socket() as unused:
            unused.bind(("127.0.0.1", 0))
            closed_port = unused.getsockname()[1]
        for arguments, said in [
                ([__file__, "--server", f"127.0.0.1:{self.grpc_port}"],
                 "gRPC INVALID_ARGUMENT: input is not a video"),
                ([self.clip, "--server", f"127.0.0.1:{closed_port}"], "gRPC UNAVAILABLE: "),
                (["no-such-file.mp4", "--server", f"127.0.0.1:{self.grpc_port}"],
                 "no-such-file.mp4: No such file or directory")]:
            with self.subTest(arguments=arguments):
                result = subprocess.run([sys.executable, grpc_example, *arguments],
                                        capture_output=True, text=True, env=stubs, timeout=120)
                self.assertEqual(result.returncode, 1, result.stderr)
                self.assertIn(said, result.stderr)
                self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)

    def test_curl_uploads_a_file_to_classify(self):
        result = subprocess.run(
            ["curl", "-sS", "--data-binary", f"@{self.clip}", "-w", "\n%{http_code}",
             f"http://127.0.0.1:{self.port}/v2/models/small/classify?top_k=3"],
            capture_output=True, text=True, check=True)
        body, code = result.stdout.rsplit("\n", 1)
        self.assertEqual(code, "200", body)
        answer = json.loads(body)
        self.check_labels([e["label"] for e in answer["top_k"]],
                          [e["score"] for e in answer["top_k"]])
        self.assertEqual(answer["frames_used"], 4)

    def test_infer_with_binary_data_and_json(self):
        header = json.dumps({
            "id": "http-1", "parameters": {"top_k": 3},
            "inputs": [{"name": "VIDEO", "datatype": "BYTES", "shape": [1],
                        "parameters": {"binary_data_size": len(VIDEO) + 4}}],
            "outputs": [{"name": "LABELS"}, {"name": "SCORES", "parameters": {"binary_data": True}}],
        }).encode()
        code, headers, body = http(
            self.port, "/v2/models/small/infer", header + bytes_elements(VIDEO),
            {"Inference-Header-Content-Length": str(len(header)),
             "Content-Type": "application/octet-stream"})
        self.assertEqual(code, 200, body)
        length = int(headers["Inference-Header-Content-Length"])
        answer = json.loads(body[:length])
        self.assertEqual((answer["model_name"], answer["id"]), ("small", "http-1"))
        labels, scores = answer["outputs"]
        self.assertEqual(scores["parameters"]["binary_data_size"], 12)
        self.check_labels(labels["data"], struct.unpack("<3f", body[length:]))

        # JSON alone: a URI input, every output in the JSON.
        request = {"parameters": {"top_k": 3},
                   "inputs": [{"name": "URI", "datatype": "BYTES", "shape": [1],
                               "data": [f"file://{self.clip}"]}]}
        code, _, body = http(self.port, "/v2/models/small/versions/1/infer",
                             json.dumps(request).encode(), {"Content-Type": "application/json"})
        self.assertEqual(code, 200, body)
        outputs = {o["name"]: o for o in json.loads(body)["outputs"]}
        self.check_labels(outputs["LABELS"]["data"], outputs["SCORES"]["data"])
        self.assertEqual(outputs["FRAME_TIMES"]["shape"], [4])

    def test_metadata_health_config_and_statistics(self):
        code, _, body = http(self.port, "/v2")
        self.assertEqual((code, json.loads(body)["name"]), (200, "vidclf"))
        self.assertEqual(http(self.port, "/v2/health/live")[0], 200)
        self.assertEqual(http(self.port, "/v2/health/ready")[0], 200)
        self.assertEqual(http(self.port, "/v2/models/small/ready")[0], 200)
        self.assertEqual(http(self.port, "/v2/models/nope/ready")[0], 404)
        code, _, body = http(self.port, "/v2/models/small")
        self.assertEqual(code, 200)
        self.assertEqual(json.loads(body)["inputs"][0], {"name": "VIDEO", "datatype": "BYTES",
                                                          "shape": [1]})
        code, _, body = http(self.port, "/v2/models/small/config")
        self.assertEqual((code, json.loads(body)["max_batch_size"] if "max_batch_size" in
                          json.loads(body) else 0), (200, 0))
        self.assertEqual(json.loads(body)["dynamic_batching"]["max_queue_delay_microseconds"],
                         2000)
        http(self.port, "/v2/models/small/classify", VIDEO)
        code, _, body = http(self.port, "/v2/models/small/stats")
        stats = json.loads(body)["model_stats"][0]
        self.assertEqual(code, 200)
        self.assertGreaterEqual(stats["inference_stats"]["success"]["count"], 1)

    def test_bad_requests_get_a_clear_status_and_serving_goes_on(self):
        cases = [
            (http(self.port, "/v2/models/small/infer", b"{not json"), 400, "not a JSON object"),
            (http(self.port, "/v2/models/small/infer", b'{"inputs": 3}'), 400, "inputs"),
            (http(self.port, "/v2/models/nope/infer",
                  json.dumps({"inputs": [{"name": "URI", "datatype": "BYTES", "shape": [1],
                                          "data": ["file:///etc/passwd"]}]}).encode()),
             404, "nope"),
            (http(self.port, "/v2/models/small/infer",
                  json.dumps({"inputs": [{"name": "URI", "datatype": "BYTES", "shape": [1],
                                          "data": ["file:///etc/passwd"]}]}).encode()),
             403, "allow"),
            (http(self.port, "/v2/models/small/classify?top_k=many", VIDEO), 400, "top_k"),
            (http(self.port, "/v2/models/small/classify?colour=red", VIDEO), 400, "colour"),
            (http(self.port, "/v2/models/small/classify", b"\x00" * 1000), 400,
             "not a video container"),
            (http(self.port, "/v3/anything"), 404, "/v2"),
            (http(self.port, "/v2/models/small", b"x", method="DELETE"), 404, "no endpoint"),
        ]
        for (code, _, body), want_code, message in cases:
            with self.subTest(message=message):
                self.assertEqual(code, want_code, body)
                self.assertIn(message, json.loads(body)["error"])
                self.assertNotIn("root:", body.decode(errors="replace"))
        # A body over the limit is refused on its Content-Length, before it is sent (curl waits
        # for "100 Continue", which does not come).
        big = os.path.join(TMP.name, "big.bin")
        with open(big, "wb") as f:
            f.write(bytes(5 << 20))
        result = subprocess.run(
            ["curl", "-sS", "--data-binary", f"@{big}", "-w", "\n%{http_code}",
             f"http://127.0.0.1:{self.port}/v2/models/small/classify"],
            capture_output=True, text=True, check=False)
        body, code = result.stdout.rsplit("\n", 1)
        self.assertEqual(code, "413", result.stderr)
        self.assertIn("over this server's limit", json.loads(body)["error"])
        # Huge headers: libmicrohttpd answers 431 (or closes), and the next call is served.
        try:
            code = http(self.port, "/v2", headers={"X-Filler": "x" * 100000})[0]
            self.assertGreaterEqual(code, 400)
        except OSError:
            pass
        # 200 idle connections do not hold up a call.
        idle = [socket.create_connection(("127.0.0.1", self.port)) for _ in range(200)]
        try:
            self.assertEqual(http(self.port, "/v2/models/small/classify", VIDEO)[0], 200)
        finally:
            for connection in idle:
                connection.close()

    def test_a_client_that_leaves_cancels_its_call(self):
        """A client that closes its connection while its call decodes: the engine abandons the
        call, counted CANCELLED, and the server goes on serving. (A server of its own, on one
        core, where the call takes a second or two.)"""
        long_video = os.path.join(self.allowed, "long.mp4")
        subprocess.run(["ffmpeg", "-v", "error", "-f", "lavfi", "-i",
                        "testsrc2=size=1920x1080:rate=25:duration=30", "-c:v", "libx264",
                        "-preset", "ultrafast", "-crf", "40", "-y", long_video], check=True)
        server, _, metrics_port, port = start_server(
            "--http-port", "0", "--cores", "1", "--allow-uri", f"file://{self.allowed}/")
        body = json.dumps({"parameters": {"num_frames": 256},
                           "inputs": [{"name": "URI", "datatype": "BYTES", "shape": [1],
                                       "data": [f"file://{long_video}"]}]}).encode()

        def calls(code):
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics",
                                        timeout=10) as page:
                text = page.read().decode()
            return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                       if line.startswith("vidclf_requests_total{")
                       and 'method="HttpModelInfer"' in line and f'code="{code}"' in line)

        try:
            client = socket.create_connection(("127.0.0.1", port))
            client.sendall(b"POST /v2/models/small/infer HTTP/1.1\r\nHost: vidclf\r\n"
                           b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                           % len(body) + body)
            time.sleep(0.2)
            client.close()
            deadline = time.monotonic() + 30
            while calls("CANCELLED") == 0:
                self.assertEqual(calls("OK"), 0, "the call ran to its end")
                self.assertLess(time.monotonic(), deadline, "the call was not cancelled")
                time.sleep(0.1)
            code, _, answer = http(port, "/v2/models/small/infer", body)
            self.assertEqual(code, 200, answer)
        finally:
            stop_server(server)

    def test_a_client_that_sends_a_byte_a_second(self):
        """Trickled headers and bodies hold up no other call; a body still arriving after
        --http-body-timeout-s (2 here) has its connection closed."""
        header_trickler = socket.create_connection(("127.0.0.1", self.port))
        body_trickler = socket.create_connection(("127.0.0.1", self.port))
        body_trickler.sendall(b"POST /v2/models/small/classify HTTP/1.1\r\nHost: vidclf\r\n"
                              b"Content-Length: 1000\r\n\r\n")
        body_trickler.settimeout(0.1)
        request = b"GET /v2/health/ready HTTP/1.1\r\nHost: vidclf\r\n"
        start = time.monotonic()
        closed_after = None
        for second in range(6):
            header_trickler.sendall(request[second:second + 1])
            try:
                body_trickler.sendall(b"x")
                if body_trickler.recv(4096) == b"":
                    closed_after = time.monotonic() - start
                    break
            except socket.timeout:
                pass
            except OSError:  # reset by the server
                closed_after = time.monotonic() - start
                break
            self.assertEqual(http(self.port, "/v2/models/small/classify", VIDEO)[0], 200)
            time.sleep(1)
        header_trickler.close()
        body_trickler.close()
        self.assertIsNotNone(closed_after, "a body trickled for 6 s was still being read")
        self.assertGreaterEqual(closed_after, 2)


class HttpTokenTest(unittest.TestCase):
    """The HTTP door takes --token-file's tokens, but for its health checks; with client
    certificates asked for (which it cannot check) the server does not start."""
    TOKEN = "http-client-token-0123456789"

    def test_token_but_for_health(self):
        tokens = os.path.join(TMP.name, "http-tokens")
        with open(tokens, "w") as f:
            f.write(f"{self.TOKEN}\n")
        server, _, _, port = start_server("--token-file", tokens, "--http-port", "0")
        try:
            self.assertEqual(http(port, "/v2/health/ready")[0], 200)
            self.assertEqual(http(port, "/v2/models/small/ready")[0], 200)
            code, _, body = http(port, "/v2/models/small/classify", VIDEO)
            self.assertEqual(code, 401)
            self.assertIn("bearer token", json.loads(body)["error"])
            code, _, body = http(port, "/v2/models/small/classify", VIDEO,
                                 {"Authorization": f"Bearer {self.TOKEN}"})
            self.assertEqual(code, 200, body)
        finally:
            stop_server(server)

    def test_no_http_door_where_client_certificates_are_asked(self):
        with self.assertRaises(RuntimeError) as error:
            start_server("--tls-cert", "/nonexistent.pem", "--tls-key", "/nonexistent.key",
                         "--tls-client-ca", "/nonexistent-ca.pem", "--http-port", "0")
        self.assertIn("does not check client certificates", str(error.exception))


class InferenceProtocolDrainTest(unittest.TestCase):
    """While the server drains, ServerLive says live, ServerReady and ModelReady not ready, and
    ModelInfer is refused with UNAVAILABLE (retry on another replica)."""

    def test_not_ready_while_draining(self):
        server, grpc_port, _, http_port = start_server("--drain-timeout-s", "3", "--http-port",
                                                       "0")
        channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
        ready = v2_method(channel, "ServerReady", V2_PB.ServerReadyResponse)
        self.assertTrue(ready(V2_PB.ServerReadyRequest(), timeout=10).ready)
        # An upload that has not ended holds the drain open until its timeout.
        release = threading.Event()

        def messages():
            yield PB.ClassifyUploadRequest(settings=PB.ClassifyRequest())
            yield PB.ClassifyUploadRequest(chunk=VIDEO[:100])
            release.wait(timeout=30)

        upload = channel.stream_unary(
            "/vidclf.v1.VideoClassifier/ClassifyUpload",
            request_serializer=PB.ClassifyUploadRequest.SerializeToString,
            response_deserializer=PB.ClassifyResponse.FromString).future(messages(), timeout=60)
        time.sleep(0.5)
        server.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        while ready(V2_PB.ServerReadyRequest(), timeout=10).ready:
            self.assertLess(time.monotonic(), deadline, "still ready 10 s into the drain")
            time.sleep(0.05)
        self.assertTrue(v2_method(channel, "ServerLive", V2_PB.ServerLiveResponse)(
            V2_PB.ServerLiveRequest(), timeout=10).live)
        self.assertFalse(v2_method(channel, "ModelReady", V2_PB.ModelReadyResponse)(
            V2_PB.ModelReadyRequest(name="small"), timeout=10).ready)
        self.assertEqual(http(http_port, "/v2/health/ready")[0], 503)
        self.assertEqual(http(http_port, "/v2/health/live")[0], 200)
        with self.assertRaises(grpc.RpcError) as error:
            v2_method(channel, "ModelInfer", V2_PB.ModelInferResponse)(
                infer_request(VIDEO), timeout=10)
        self.assertEqual(error.exception.code(), grpc.StatusCode.UNAVAILABLE)
        # The upload, still open, is cancelled at the drain timeout.
        with self.assertRaises(grpc.RpcError) as error:
            upload.result(timeout=30)
        release.set()
        self.assertEqual(error.exception.code(), grpc.StatusCode.UNAVAILABLE)
        channel.close()
        self.assertEqual(server.wait(timeout=30), 0)


def openssl(*arguments):
    subprocess.run(["openssl", *arguments], check=True, capture_output=True)


class SecureClientTest(unittest.TestCase):
    """Mutual TLS and a bearer token, from grpcio: the services need both, health checks and
    reflection need neither."""
    TOKEN = "python-client-token-0123456789"

    @classmethod
    def setUpClass(cls):
        cls.dir = os.path.join(TMP.name, "tls")
        os.makedirs(cls.dir)
        path = lambda name: os.path.join(cls.dir, name)
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        openssl("req", "-x509", *ec, "-days", "2", "-subj", "/CN=test-ca", "-keyout", path("ca.key"),
                "-out", path("ca.pem"))
        with open(path("san.ext"), "w") as ext:
            ext.write("subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n")
        for name in ("server", "client"):
            openssl("req", *ec, "-subj", f"/CN={name}", "-keyout", path(f"{name}.key"), "-out",
                    path(f"{name}.csr"))
            openssl("x509", "-req", "-days", "2", "-in", path(f"{name}.csr"), "-CA", path("ca.pem"),
                    "-CAkey", path("ca.key"), "-CAcreateserial", "-extfile", path("san.ext"), "-out",
                    path(f"{name}.pem"))
        with open(path("tokens"), "w") as tokens:
            tokens.write(f"# the Python client\n{cls.TOKEN}\n")
        cls.server, grpc_port, _ = start_server(
            "--tls-cert", path("server.pem"), "--tls-key", path("server.key"),
            "--tls-client-ca", path("ca.pem"), "--token-file", path("tokens"))
        read = lambda name: open(path(name), "rb").read()
        cls.address = f"127.0.0.1:{grpc_port}"
        cls.options = (("grpc.ssl_target_name_override", "localhost"),)
        credentials = grpc.ssl_channel_credentials(read("ca.pem"), read("client.key"),
                                                   read("client.pem"))
        cls.channel = grpc.secure_channel(cls.address, credentials, options=cls.options)
        cls.anonymous = grpc.secure_channel(
            cls.address, grpc.ssl_channel_credentials(read("ca.pem")), options=cls.options)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.anonymous.close()
        stop_server(cls.server)

    def list_models(self, channel, metadata=None):
        call = channel.unary_unary(
            "/vidclf.v1.VideoClassifier/ListModels",
            request_serializer=PB.ListModelsRequest.SerializeToString,
            response_deserializer=PB.ListModelsResponse.FromString)
        return call(PB.ListModelsRequest(), timeout=10, metadata=metadata)

    def test_token_over_mutual_tls(self):
        classify = self.channel.unary_unary(
            "/vidclf.v1.VideoClassifier/Classify",
            request_serializer=PB.ClassifyRequest.SerializeToString,
            response_deserializer=PB.ClassifyResponse.FromString)
        response = classify(PB.ClassifyRequest(video=VIDEO), timeout=60,
                            metadata=(("authorization", f"Bearer {self.TOKEN}"),))
        self.assertEqual(response.model, "small")

    def test_no_token_is_unauthenticated(self):
        for metadata in (None, (("authorization", "Bearer not-the-token-0123456789"),)):
            with self.assertRaises(grpc.RpcError) as error:
                self.list_models(self.channel, metadata)
            self.assertEqual(error.exception.code(), grpc.StatusCode.UNAUTHENTICATED)

    def test_health_and_reflection_need_no_token(self):
        check = self.channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=HEALTH_PB.HealthCheckRequest.SerializeToString,
            response_deserializer=HEALTH_PB.HealthCheckResponse.FromString)
        response = check(HEALTH_PB.HealthCheckRequest(service="vidclf.v1.VideoClassifier"),
                         timeout=10)
        self.assertEqual(response.status, HEALTH_PB.HealthCheckResponse.SERVING)
        self.assertIn(b"vidclf.v1.VideoClassifier", list_services(self.channel))

    def test_inference_protocol_needs_the_token_but_for_health(self):
        infer = v2_method(self.channel, "ModelInfer", V2_PB.ModelInferResponse)
        with self.assertRaises(grpc.RpcError) as error:
            infer(infer_request(VIDEO), timeout=60)
        self.assertEqual(error.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
        response = infer(infer_request(VIDEO), timeout=60,
                         metadata=(("authorization", f"Bearer {self.TOKEN}"),))
        self.assertEqual(response.model_name, "small")
        self.assertTrue(v2_method(self.channel, "ServerReady", V2_PB.ServerReadyResponse)(
            V2_PB.ServerReadyRequest(), timeout=10).ready)

    def test_no_client_certificate_no_connection(self):
        with self.assertRaises(grpc.RpcError) as error:
            self.list_models(self.anonymous, (("authorization", f"Bearer {self.TOKEN}"),))
        self.assertEqual(error.exception.code(), grpc.StatusCode.UNAVAILABLE)

    def test_http_door_over_tls_with_the_token(self):
        """--tls-cert and --token-file on the HTTP door (without client certificates, which it
        cannot check): curl over HTTPS with the token is answered, without it refused, and
        plaintext gets no answer."""
        path = lambda name: os.path.join(self.dir, name)
        server, _, _, port = start_server(
            "--tls-cert", path("server.pem"), "--tls-key", path("server.key"), "--token-file",
            path("tokens"), "--http-port", "0")
        video = path("clip.mp4")
        with open(video, "wb") as f:
            f.write(VIDEO)

        def curl(url, *flags):
            result = subprocess.run(
                ["curl", "-sS", "--cacert", path("ca.pem"), "--resolve",
                 f"localhost:{port}:127.0.0.1", "-w", "\n%{http_code}", *flags, url],
                capture_output=True, text=True, check=False)
            return result.stdout.rsplit("\n", 1)[-1], result.stdout

        try:
            classify = f"https://localhost:{port}/v2/models/small/classify?top_k=2"
            code, body = curl(classify, "--data-binary", f"@{video}", "-H",
                              f"Authorization: Bearer {self.TOKEN}")
            self.assertEqual(code, "200", body)
            self.assertEqual(len(json.loads(body.rsplit("\n", 1)[0])["top_k"]), 2)
            code, body = curl(classify, "--data-binary", f"@{video}")
            self.assertEqual(code, "401", body)
            self.assertEqual(curl(f"https://localhost:{port}/v2/health/ready")[0], "200")
            code, _ = curl(f"http://localhost:{port}/v2/health/ready")
            self.assertNotEqual(code, "200")
        finally:
            stop_server(server)


if __name__ == "__main__":
    unittest.main(verbosity=2)
