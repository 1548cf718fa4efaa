#!/usr/bin/env python3
"""Hostile bytes at the HTTP door (issue 80), against a real vidclf-server on loopback, once without
tokens and once with --token-file (the requests then carry no valid token).

Requests whose path, query, headers, method or body hold bytes that are not UTF-8, a model name
holding NUL, or a page token the server never issued, each sent raw on a socket, get a 4xx (whose
JSON, when there is one, is valid UTF-8 holding an "error" string), and the server keeps serving:
it is still running after each, then still classifies a sample, with vidclf_internal_errors_total
at 0, and every line it logged is UTF-8. Over gRPC, ListSources refuses a forged page token with
INVALID_ARGUMENT.
Usage: hostile_http_test.py SERVER_BINARY TRAIN_BINARY PROTO_DIR
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import unittest
import urllib.request
from typing import NamedTuple

import grpc

import server_fixture
from server_fixture import http

SERVER, TRAIN, PROTO_DIR = sys.argv[1:4]
del sys.argv[1:4]

TOKEN = "hostile-http-token-0123456789abcdef"
CLIENT_ERRORS = range(400, 500)
OK_OR_CLIENT_ERROR = (200, *CLIENT_ERRORS)


def load_sources_messages(out_dir):
    """sources_pb2 from the build's stubs (VIDCLF_PYTHON_STUBS, build/python), or generated here
    from PROTO_DIR when the variable is not set."""
    stubs = os.environ.get("VIDCLF_PYTHON_STUBS")
    if not stubs:
        subprocess.run(["protoc", f"--proto_path={PROTO_DIR}", f"--python_out={out_dir}",
                        "vidclf/v1/video_classifier.proto", "vidclf/v1/sources.proto"], check=True)
        stubs = out_dir
    sys.path.insert(0, stubs)
    from vidclf.v1 import sources_pb2
    return sources_pb2


def setUpModule():
    global TMP, PB, REPO, VIDEO, TOKEN_FILE
    TMP = tempfile.TemporaryDirectory()
    PB = load_sources_messages(TMP.name)
    REPO, sample = server_fixture.train_small_repository(TRAIN, TMP.name)
    with open(sample, "rb") as video:
        VIDEO = video.read()
    TOKEN_FILE = os.path.join(TMP.name, "tokens")
    with open(TOKEN_FILE, "w") as tokens:
        tokens.write(f"{TOKEN}\n")


def tearDownModule():
    TMP.cleanup()


class Answer(NamedTuple):
    code: int
    headers: dict  # names in lower case
    body: bytes
    raw: bytes


def request_bytes(method, target, headers=(), body=None):
    """An HTTP/1.1 request of exactly these bytes, which asks the server to close once it answers."""
    lines = [method + b" " + target + b" HTTP/1.1", b"Host: 127.0.0.1", b"Connection: close",
             *headers]
    if body is not None:
        lines.append(b"Content-Length: %d" % len(body))
    return b"\r\n".join(lines) + b"\r\n\r\n" + (body or b"")


def dechunk(data):
    out = b""
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += data[:size]
        data = data[size + 2:]
    return out


def send_raw(port, data):
    """The server's answer to DATA, sent as it is on a socket of its own and read until the server
    closes it (30 s at most); None when it closes with no answer at all."""
    received = b""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        try:
            connection.sendall(data)
        except OSError:  # the server answered and closed before it had read the whole request
            pass
        while True:
            try:
                chunk = connection.recv(65536)
            except ConnectionResetError:  # closed with part of the request unread
                break
            except TimeoutError as error:
                raise TimeoutError(f"no end of the answer in 30 s; so far: {received[:300]!r}") \
                    from error
            if not chunk:
                break
            received += chunk
    if not received:
        return None
    head, _, body = received.partition(b"\r\n\r\n")
    status = re.match(rb"HTTP/1\.[01] (\d{3})[ \r]", head + b"\r")
    if status is None:
        raise AssertionError(f"not an HTTP answer: {received[:300]!r}")
    headers = {}
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().decode("latin-1").lower()] = value.strip().decode("latin-1")
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = dechunk(body)
    elif "content-length" in headers:
        body = body[:int(headers["content-length"])]
    return Answer(int(status.group(1)), headers, body, received)


class HostileRequests:
    """The requests of issue 80, each in a test of its own, numbered in the issue's order (and run
    in that order); then the checks that the server kept serving. A server that a request ends (or
    hangs) is recorded and replaced, so that each later request is still tried on a live one."""
    tokens = False

    @classmethod
    def setUpClass(cls):
        cls.deaths = []
        cls.log_not_utf8 = []
        cls.current = "setUpClass"
        cls.start()

    @classmethod
    def tearDownClass(cls):
        if cls.stop() != 0:
            raise AssertionError("server did not shut down cleanly")

    @classmethod
    def start(cls):
        flags = ["--http-port", "0"]
        if cls.tokens:
            flags += ["--token-file", TOKEN_FILE]
        server, cls.grpc_port, cls.metrics_port, cls.port = server_fixture.start_server(
            SERVER, REPO, *flags)
        # The server logs to its standard output: read, so that it never blocks on a full pipe,
        # and kept, to say what it last wrote where it ends. Its lines are UTF-8, whatever they
        # quote: one that is not is noted with the test it came in.
        log = []

        def drain():
            while True:
                try:
                    line = server.stdout.readline()
                except UnicodeDecodeError as error:
                    cls.log_not_utf8.append(f"{cls.current}: {error}")
                    continue
                except ValueError:  # closed
                    return
                if not line:
                    return
                log.append(line)

        cls.server, cls.log = server, log
        cls.drain = threading.Thread(target=drain, daemon=True)
        cls.drain.start()

    @classmethod
    def stop(cls):
        """Ends the server (SIGTERM, then SIGKILL if it hangs); its exit status."""
        server = cls.server
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
        try:
            code = server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
            code = "hung (killed)"
        cls.drain.join(timeout=10)
        server.stdout.close()
        return code

    def setUp(self):
        type(self).current = self.id()

    def authorization(self):
        return [b"Authorization: Bearer " + TOKEN.encode()] if self.tokens else []

    def survived(self):
        """None where the server still runs and answers its liveness check; otherwise what became
        of it, once another has been started in its place."""
        cls = type(self)
        if cls.server.poll() is None:
            try:
                live = send_raw(cls.port, request_bytes(b"GET", b"/v2/health/live"))
                if live is not None and live.code == 200 and cls.server.poll() is None:
                    return None
            except (OSError, AssertionError):
                pass
        # Ended, or ending (an abort takes a moment), or hung: the latter is ended here.
        try:
            code = cls.server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = "hung"
        cls.stop()
        last = "".join(cls.log[-5:])
        cls.deaths.append(f"{self.id()}: exit status {code}")
        cls.start()
        return f"exit status {code}; the server's last lines:\n{last}"

    def check_json(self, answer):
        """A JSON body is valid UTF-8 and parses; a refusal's holds an "error" string. Returns the
        parsed body (None when there is no JSON body)."""
        content_type = answer.headers.get("content-type", "").split(";")[0].strip().lower()
        if not answer.body or content_type != "application/json":
            return None
        try:
            text = answer.body.decode("utf-8")
        except UnicodeDecodeError as error:
            self.fail(f"the JSON body is not UTF-8 ({error}): {answer.body[:300]!r}")
        try:
            document = json.loads(text)
        except json.JSONDecodeError as error:
            self.fail(f"the JSON body does not parse ({error}): {text[:300]!r}")
        if answer.code >= 400:
            self.assertIsInstance(document, dict, text[:300])
            self.assertIsInstance(document.get("error"), str, text[:300])
        return document

    def exchange(self, data, codes=CLIENT_ERRORS, no_answer_ok=False):
        """Sends DATA raw; checks the server then still serves, that the answer's code is among
        CODES and its JSON; returns the answer (None where there was none and NO_ANSWER_OK)."""
        try:
            answer = send_raw(self.port, data)
        except (OSError, AssertionError) as error:
            answer = error
        death = self.survived()
        if death is not None:
            self.fail(f"the server did not survive {data[:120]!r}: {death}")
        if isinstance(answer, Exception):
            self.fail(f"no answer to {data[:120]!r}: {answer}")
        if answer is None:
            if no_answer_ok:
                return None
            self.fail(f"the connection closed with no answer to {data[:120]!r}")
        self.assertIn(answer.code, codes, f"answered {answer.code} to {data[:120]!r}: "
                                          f"{answer.raw[:400]!r}")
        self.check_json(answer)
        return answer

    def error_of(self, answer):
        return json.loads(answer.body.decode("utf-8"))["error"]

    def test_01_percent_ff_in_the_path(self):
        self.exchange(request_bytes(b"GET", b"/v2/health/live%FF"))

    def test_02_raw_ff_in_the_path(self):
        self.exchange(request_bytes(b"GET", b"/v2/health/live\xff"))

    def test_03_preflight_from_an_origin_holding_ff(self):
        self.exchange(request_bytes(b"OPTIONS", b"/v2/models/small/infer",
                                    [b"Origin: http://a\xffb",
                                     b"Access-Control-Request-Method: POST"]))

    def test_04_method_not_ascii(self):
        # libmicrohttpd may refuse it itself, or close with no answer: the one request where
        # no answer is taken, but not the server's end.
        self.exchange(b"G\xffT /v2/health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      b"Connection: close\r\n\r\n", no_answer_ok=True)

    def test_05_model_name_not_utf8(self):
        self.exchange(request_bytes(b"GET", b"/v2/models/%FF%FE"))

    def test_06_version_not_utf8(self):
        self.exchange(request_bytes(b"GET", b"/v2/models/small/versions/%FF"))

    def test_07_attention_not_utf8(self):
        self.exchange(request_bytes(b"POST", b"/v2/models/small/classify?attention=%FF",
                                    body=VIDEO))

    def test_08_top_k_not_utf8(self):
        self.exchange(request_bytes(b"POST", b"/v2/models/small/classify?top_k=%FF", body=VIDEO))

    def test_09_source_body_not_utf8(self):
        self.exchange(request_bytes(b"POST", b"/v1/sources?source_id=cam",
                                    [b"Content-Type: application/json"], body=b"\xff\xfe"))

    def test_10_model_name_holding_nul_is_refused_not_cut(self):
        # With tokens, the door may refuse the missing token first.
        answer = self.exchange(request_bytes(b"GET", b"/v2/models/small%00x"),
                               codes=(400, 401) if self.tokens else (400,))
        if answer.code == 400:
            error = self.error_of(answer)
            self.assertTrue("NUL" in error or "control" in error.lower(), error)

    def test_11_header_not_utf8(self):
        # Without tokens a valid request for the model's metadata.
        self.exchange(request_bytes(b"GET", b"/v2/models/small", [b"X-Anything: \xff\xfe"]),
                      codes=CLIENT_ERRORS if self.tokens else OK_OR_CLIENT_ERROR)

    def test_12_authorization_not_utf8(self):
        self.exchange(request_bytes(b"GET", b"/v2/models/small", [b"Authorization: Bearer \xff"]),
                      codes=(401,) if self.tokens else OK_OR_CLIENT_ERROR)

    def test_13a_source_name_not_utf8(self):
        self.exchange(request_bytes(b"GET", b"/v1/sources/%FF"))

    def test_13b_forged_page_token(self):
        if not self.tokens:
            # The listing itself is served: the refusal is the token's.
            self.exchange(request_bytes(b"GET", b"/v1/sources"), codes=(200,))
        self.exchange(request_bytes(b"GET", b"/v1/sources?page_token=garbage-token"),
                      codes=CLIENT_ERRORS if self.tokens else (400,))

    def test_13c_forged_page_token_with_the_token(self):
        if not self.tokens:
            self.skipTest("the server without tokens: test_13b")
        self.exchange(request_bytes(b"GET", b"/v1/sources?page_token=garbage-token",
                                    self.authorization()), codes=(400,))

    # Found by tests/fuzz/json_bodies_fuzzer.cc and beside it: JSON bodies nested a million deep
    # (which a recursive walk of the request turned into a stack overflow), and parameters that
    # are not an object (which threw).
    def test_14a_infer_body_nested_deep(self):
        depth = 1_000_000
        body = (b'{"inputs":[{"name":"VIDEO","shape":[1],"datatype":"BYTES","data":' +
                b"[" * depth + b'"a"' + b"]" * depth + b"}]}")
        answer = self.exchange(request_bytes(b"POST", b"/v2/models/small/infer",
                                             [b"Content-Type: application/json",
                                              *self.authorization()], body=body), codes=(400,))
        self.assertIn("nest deeper", self.error_of(answer))

    def test_14b_source_body_nested_deep(self):
        depth = 1_000_000
        body = b'{"uri":"rtsp://a/","labels":' + b'{"a":' * depth + b"1" + b"}" * depth + b"}"
        self.exchange(request_bytes(b"POST", b"/v1/sources?source_id=deep",
                                    [b"Content-Type: application/json"], body=body))

    def test_14c_output_parameters_not_an_object(self):
        body = (b'{"inputs":[{"name":"VIDEO","shape":[1],"datatype":"BYTES","data":["a"]}],'
                b'"outputs":[{"name":"LABELS","parameters":18}]}')
        answer = self.exchange(request_bytes(b"POST", b"/v2/models/small/infer",
                                             [b"Content-Type: application/json",
                                              *self.authorization()], body=body), codes=(400,))
        self.assertIn("not an object", self.error_of(answer))

    def test_80_grpc_forged_page_token(self):
        metadata = (("authorization", f"Bearer {TOKEN}"),) if self.tokens else None
        with grpc.insecure_channel(f"127.0.0.1:{self.grpc_port}") as channel:
            list_sources = channel.unary_unary(
                "/vidclf.v1.Sources/ListSources",
                request_serializer=PB.ListSourcesRequest.SerializeToString,
                response_deserializer=PB.ListSourcesResponse.FromString)
            list_sources(PB.ListSourcesRequest(), timeout=30, metadata=metadata)
            with self.assertRaises(grpc.RpcError) as refused:
                list_sources(PB.ListSourcesRequest(page_token="garbage-token"), timeout=30,
                             metadata=metadata)
        self.assertEqual(refused.exception.code(), grpc.StatusCode.INVALID_ARGUMENT,
                         refused.exception.details())
        self.assertIsNone(self.survived())

    def test_90_still_classifies(self):
        headers = {"Authorization": f"Bearer {TOKEN}"} if self.tokens else {}
        code, response_headers, body = http(self.port, "/v2/models/small/classify", VIDEO,
                                            headers)
        self.assertEqual(code, 200, body[:300])
        self.assertEqual(response_headers.get_content_type(), "application/json")
        self.assertIn("top_k", json.loads(body.decode("utf-8")))
        self.assertEqual(type(self).deaths, [], "requests above ended the server")

    def test_91_no_internal_errors(self):
        # The metrics port is not guarded by --token-file.
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                    timeout=30) as page:
            text = page.read().decode("utf-8")
        family = "vidclf_internal_errors_total"
        lines = text.splitlines()
        declared = any(line.split()[2:3] == [family] for line in lines
                       if line.startswith(("# TYPE ", "# HELP ")))
        samples = [(line, match.group(1)) for line in lines
                   if (match := re.match(rf"{family}(?:\{{.*\}})?\s+(\S+)", line))]
        self.assertTrue(declared or samples, f"no {family} on the metrics page")
        for line, value in samples:
            self.assertEqual(float(value), 0, line)


    def test_92_log_lines_are_utf8(self):
        # What the requests above made the server log has been read by now: spdlog flushes each
        # line, and the checks above came after them.
        self.assertEqual(type(self).log_not_utf8, [],
                         "the server logged bytes that are not UTF-8")


class WithoutTokensTest(HostileRequests, unittest.TestCase):
    tokens = False


class WithTokensTest(HostileRequests, unittest.TestCase):
    tokens = True


if __name__ == "__main__":
    unittest.main(verbosity=2)
