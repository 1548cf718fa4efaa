#!/usr/bin/env python3
"""The HTTP door from a real browser: Debian's headless Chromium, driven over the DevTools
protocol, against a real vidclf-server on loopback.

- The page for people at /: the models are listed, a file set on its input is classified and the
  labels, frames and timings appear as the server answered them; a bad file shows the server's
  message; with tokens, the page lists nothing until the token is typed; --no-http-page has none.
- CORS: a page served by another local HTTP server calls classify with fetch, as
  docs/inference-protocol.md shows, from an origin --http-allow-origin names (with a token, so the browser sends a
  preflight); the same call from an origin it does not name is kept from the page.

Usage: browser_test.py SERVER_BINARY TRAIN_BINARY
With VIDCLF_PAGE_SCREENSHOT=FILE.png set, the page with its answer is saved there (the screenshot
of docs/inference-protocol.md, docs/page.png).
"""
import base64
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import websocket  # python3-websocket

import server_fixture
from server_fixture import http, stop_server

SERVER, TRAIN = sys.argv[1:3]
del sys.argv[1:3]
TOKEN = "browser-test-token-0123456789"


def setUpModule():
    global TMP, REPO, SAMPLE, TOKENS
    TMP = tempfile.TemporaryDirectory()
    REPO, SAMPLE = server_fixture.train_small_repository(TRAIN, TMP.name)
    TOKENS = os.path.join(TMP.name, "tokens")
    with open(TOKENS, "w") as tokens:
        tokens.write(f"{TOKEN}\n")


def tearDownModule():
    TMP.cleanup()


def start_server(*flags):
    return server_fixture.start_server(SERVER, REPO, "--http-port", "0", *flags)


def read(path):
    with open(path) as f:
        return f.read()


class Chromium:
    """Headless Chromium with one page, driven over the DevTools protocol."""

    def __init__(self):
        binary = shutil.which("chromium-headless-shell") or shutil.which("chromium")
        if binary is None:
            raise RuntimeError("no chromium-headless-shell: make deps installs it")
        # A profile of its own, outside the test's directory, removed once every Chromium
        # process has left it.
        self.profile = tempfile.TemporaryDirectory(prefix="vidclf-chromium-",
                                                   ignore_cleanup_errors=True)
        # No sandbox: tests may run as root, where Chromium refuses its sandbox; the pages are
        # the test's own, on loopback. A session of its own, so that close() can wait for its
        # helper processes too.
        self.process = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-port=0",
             f"--user-data-dir={self.profile.name}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        port_file = os.path.join(self.profile.name, "DevToolsActivePort")
        deadline = time.monotonic() + 30
        while not (os.path.exists(port_file) and read(port_file).count("\n") >= 1):
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError("Chromium did not start")
            time.sleep(0.1)
        port = int(read(port_file).split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as listing:
            pages = json.load(listing)
        url = next(p["webSocketDebuggerUrl"] for p in pages if p["type"] == "page")
        self.socket = websocket.create_connection(url, timeout=120, suppress_origin=True)
        self.next_id = 0
        self.send("Page.enable")
        self.send("Emulation.setDeviceMetricsOverride", width=1280, height=860,
                  deviceScaleFactor=1, mobile=False)

    def close(self):
        """Closes the browser, waits for all its processes, and removes its profile."""
        try:
            self.send("Browser.close")  # it may close the connection before answering
        except (websocket.WebSocketException, OSError):
            pass
        self.socket.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        # Its helpers (renderer, GPU, zygote) leave after it: wait for them, killing them after
        # 10 s, and give up after 15 (a zombie no process reaps would never leave).
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline + 5:
            try:
                os.killpg(self.process.pid, signal.SIGKILL if time.monotonic() > deadline else 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        self.profile.cleanup()

    def send(self, method, **params):
        """The result of one DevTools command (events in between are skipped)."""
        self.next_id += 1
        self.socket.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") != self.next_id:
                continue
            if "error" in message:
                raise RuntimeError(f"{method}: {message['error']}")
            return message["result"]

    def evaluate(self, expression):
        """`expression`'s value in the page (awaited when it is a promise)."""
        result = self.send("Runtime.evaluate", expression=expression, awaitPromise=True,
                           returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression, timeout=60):
        deadline = time.monotonic() + timeout
        while not self.evaluate(expression):
            if time.monotonic() > deadline:
                raise AssertionError(f"still false after {timeout} s: {expression}")
            time.sleep(0.1)

    def open(self, url):
        self.send("Page.navigate", url=url)
        self.wait_for(f"location.href === {json.dumps(url)} && document.readyState === 'complete'")

    def set_file(self, selector, path):
        """Sets a file input's file and fires its change event, as a person's choice does."""
        root = self.send("DOM.getDocument")["root"]["nodeId"]
        node = self.send("DOM.querySelector", nodeId=root, selector=selector)["nodeId"]
        self.send("DOM.setFileInputFiles", files=[path], nodeId=node)

    def screenshot(self, path):
        with open(path, "wb") as image:
            image.write(base64.b64decode(self.send("Page.captureScreenshot", format="png")["data"]))


class BrowserTestCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.browser = Chromium()

    @classmethod
    def tearDownClass(cls):
        cls.browser.close()


class PageTest(BrowserTestCase):
    """The page for people at / on the HTTP port."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.server, _, _, cls.port = start_server()
        with open(SAMPLE, "rb") as video:
            code, _, body = http(cls.port, "/v2/models/small/classify?top_k=5", video.read())
        assert code == 200, body
        cls.expected = json.loads(body)

    @classmethod
    def tearDownClass(cls):
        stop_server(cls.server)
        super().tearDownClass()

    def test_a_dropped_video_is_classified(self):
        page = self.browser
        page.open(f"http://127.0.0.1:{self.port}/")
        page.wait_for("document.querySelectorAll('#models tbody tr').length === 1")
        self.assertEqual(page.evaluate("document.getElementById('model').value"), "small")
        self.assertEqual(
            page.evaluate("[...document.querySelectorAll('#models tbody td')]"
                          ".map(td => td.textContent).slice(0, 3)"),
            ["small", "1", "VIDEO BYTES [1]\nURI BYTES [1]"])
        self.assertRegex(page.evaluate("document.getElementById('server').textContent"),
                         r"^vidclf \d+\.\d+\.\d+$")

        page.set_file("#file", SAMPLE)
        page.wait_for("!document.getElementById('result').hidden")
        labels = page.evaluate(
            "[...document.querySelectorAll('#labels td.label')].map(td => td.textContent)")
        scores = page.evaluate(
            "[...document.querySelectorAll('#labels td.score')].map(td => +td.textContent)")
        self.assertEqual(labels, [e["label"] for e in self.expected["top_k"]])
        for got, want in zip(scores, [e["score"] for e in self.expected["top_k"]]):
            self.assertAlmostEqual(got, want, places=3)
        captions = page.evaluate(
            "[...document.querySelectorAll('#frames figcaption')].map(c => c.textContent)")
        self.assertEqual(captions,
                         [f"{t:.2f} s" for t in self.expected["frame_timestamps_seconds"]])
        self.assertEqual(
            page.evaluate("[...document.querySelectorAll('#timings td:first-child')]"
                          ".map(td => td.textContent)"),
            ["queue", "decode", "preprocess", "embed", "head", "total"])
        self.assertTrue(page.evaluate("document.getElementById('error').hidden"))
        # The frames drawn from the file itself where Chromium has its codec, their times alone
        # where not (MPEG-4 Part 2); the screenshot once they are.
        page.wait_for("document.getElementById('frames').dataset.shown")
        codec = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0",
                                "-show_entries", "stream=codec_name", "-of", "csv=p=0", SAMPLE],
                               capture_output=True, text=True, check=True).stdout.strip()
        self.assertEqual(page.evaluate("document.getElementById('frames').dataset.shown"),
                         "pictures" if codec in ("h264", "vp8", "vp9", "av1") else "times")
        if os.environ.get("VIDCLF_PAGE_SCREENSHOT"):
            page.screenshot(os.environ["VIDCLF_PAGE_SCREENSHOT"])

    def test_a_bad_file_shows_the_servers_message(self):
        page = self.browser
        page.open(f"http://127.0.0.1:{self.port}/")
        page.wait_for("document.querySelectorAll('#models tbody tr').length === 1")
        notes = os.path.join(TMP.name, "notes.mp4")
        with open(notes, "wb") as f:
            f.write(b"these are notes, not a video\n" * 40)
        page.set_file("#file", notes)
        page.wait_for("!document.getElementById('error').hidden")
        message = page.evaluate("document.getElementById('error').textContent")
        self.assertIn("notes.mp4: ", message)
        self.assertIn("not a video container", message)
        self.assertTrue(page.evaluate("document.getElementById('result').hidden"))
        # The server goes on serving.
        with open(SAMPLE, "rb") as video:
            self.assertEqual(http(self.port, "/v2/models/small/classify", video.read())[0], 200)

    def test_files_carry_a_content_security_policy(self):
        for path, kind in (("/", "text/html"), ("/page.js", "text/javascript"),
                           ("/page.css", "text/css")):
            code, headers, _ = http(self.port, path)
            self.assertEqual(code, 200, path)
            self.assertTrue(headers["Content-Type"].startswith(kind), headers["Content-Type"])
            self.assertIn("default-src 'self'", headers["Content-Security-Policy"])
        self.assertEqual(http(self.port, "/nothing.js")[0], 404)


class PageWithTokensTest(BrowserTestCase):
    """Behind tokens the page's files load, its calls need the token the person types."""

    def test_models_are_listed_once_the_token_is_typed(self):
        server, _, _, port = start_server("--token-file", TOKENS)
        try:
            page = self.browser
            page.open(f"http://127.0.0.1:{port}/")
            page.wait_for("document.getElementById('server').textContent.includes('cannot')")
            self.assertIn("bearer token",
                          page.evaluate("document.getElementById('server').textContent"))
            page.evaluate(f"""(() => {{
                const input = document.getElementById('token');
                input.value = {json.dumps(TOKEN)};
                input.dispatchEvent(new Event('change'));
            }})()""")
            page.wait_for("document.querySelectorAll('#models tbody tr').length === 1")
            page.set_file("#file", SAMPLE)
            page.wait_for("!document.getElementById('result').hidden")
            self.assertEqual(http(port, "/v2/models/small/classify")[0], 401)
        finally:
            stop_server(server)

    def test_no_page_when_turned_off(self):
        server, _, _, port = start_server("--no-http-page")
        try:
            code, _, body = http(port, "/")
            self.assertEqual(code, 404)
            self.assertIn("/v2", json.loads(body)["error"])
            self.assertEqual(http(port, "/v2/health/ready")[0], 200)
        finally:
            stop_server(server)


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve_directory(directory):
    """A local HTTP server for `directory` on a free loopback port, in a thread."""
    handler = functools.partial(QuietHandler, directory=directory)
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


# The browser call of docs/inference-protocol.md ("From a browser"), with the token a deployment
# hands its page.
FETCH = """(async () => {
  const video = await (await fetch('clip.mp4')).blob();
  try {
    const response = await fetch('%(server)s/v2/models/small/classify?top_k=3', {
      method: 'POST',
      headers: {'Authorization': 'Bearer %(token)s', 'Content-Type': 'application/octet-stream'},
      body: video,
    });
    const answer = await response.json();
    return response.ok ? answer.top_k.map(e => e.label) : 'refused: ' + answer.error;
  } catch (error) {
    return 'blocked: ' + error.message;
  }
})()"""


class CorsTest(BrowserTestCase):
    """fetch from pages of other origins: those --http-allow-origin names get the answer."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        site = os.path.join(TMP.name, "site")
        os.makedirs(site, exist_ok=True)
        shutil.copy(SAMPLE, os.path.join(site, "clip.mp4"))
        with open(os.path.join(site, "index.html"), "w") as index:
            index.write("<!doctype html><title>another site</title>\n")
        cls.allowed_site = serve_directory(site)
        cls.other_site = serve_directory(site)
        allowed = f"http://127.0.0.1:{cls.allowed_site.server_address[1]}"
        cls.server, _, _, cls.port = start_server("--token-file", TOKENS,
                                                  "--http-allow-origin", allowed)
        with open(SAMPLE, "rb") as video:
            code, _, body = http(cls.port, "/v2/models/small/classify?top_k=3", video.read(),
                                 {"Authorization": f"Bearer {TOKEN}"})
        assert code == 200, body
        cls.expected = [e["label"] for e in json.loads(body)["top_k"]]

    @classmethod
    def tearDownClass(cls):
        stop_server(cls.server)
        for site in (cls.allowed_site, cls.other_site):
            site.shutdown()
        super().tearDownClass()

    def call_from(self, site, token=TOKEN):
        self.browser.open(f"http://127.0.0.1:{site.server_address[1]}/")
        return self.browser.evaluate(
            FETCH % {"server": f"http://127.0.0.1:{self.port}", "token": token})

    def test_an_allowed_origin_gets_the_answer(self):
        self.assertEqual(self.call_from(self.allowed_site), self.expected)

    def test_a_wrong_token_is_refused_readably(self):
        self.assertIn("refused: ", self.call_from(self.allowed_site, token="wrong"))

    def test_another_origin_is_kept_from_the_answer(self):
        self.assertTrue(self.call_from(self.other_site).startswith("blocked: "))
        # The server refused its preflight, and goes on serving.
        code, _, body = http(self.port, "/v2/models/small/classify", method="OPTIONS",
                             headers={"Origin": "http://elsewhere.example",
                                      "Access-Control-Request-Method": "POST"})
        self.assertEqual(code, 403)
        self.assertIn("--http-allow-origin", json.loads(body)["error"])
        self.assertEqual(self.call_from(self.allowed_site), self.expected)


if __name__ == "__main__":
    unittest.main()
