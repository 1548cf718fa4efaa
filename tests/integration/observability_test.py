#!/usr/bin/env python3
"""deploy/'s Grafana dashboard and Prometheus rules against a real vidclf-server scraped by a real
Prometheus: every metric they name is one the server exports, every dashboard query runs, the
recording rules produce series and every rule evaluates without error.

Usage: observability_test.py SERVER_BINARY CLIENT_BINARY TRAIN_BINARY SOURCE_DIR
"""
import glob
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse
import urllib.request

import yaml

SERVER, CLIENT, TRAIN, SOURCE_DIR = sys.argv[1:5]
del sys.argv[1:5]
DASHBOARD = os.path.join(SOURCE_DIR, "deploy/grafana/dashboards/vidclf.json")
RULES = os.path.join(SOURCE_DIR, "deploy/prometheus/rules.yml")

# Names in expressions that refer to metrics: the server's own, the process collector's, the
# recording rules', and Prometheus's `up`.
METRIC_NAME = re.compile(r"\b(vidclf_[a-z_]+|process_[a-z_]+|vidclf:[a-z0-9_:]+|up)\b")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url):
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode()


def dashboard_expressions():
    """Every target expression of the dashboard, with Grafana's variables given values."""
    expressions = []

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("expr"), str):
                expressions.append(node["expr"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    with open(DASHBOARD) as f:
        walk(json.load(f)["panels"])
    return [e.replace("$__rate_interval", "1m").replace("$__interval", "15s")
            .replace("$instance", ".*") for e in expressions]


def rules():
    with open(RULES) as f:
        return [rule for group in yaml.safe_load(f)["groups"] for rule in group["rules"]]


class ObservabilityTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        repo = os.path.join(cls.tmp.name, "repo")
        samples = os.path.join(cls.tmp.name, "samples")
        subprocess.run([TRAIN, "all", "--synthesize", "--data", os.path.join(cls.tmp.name, "data"),
                        "--work", os.path.join(cls.tmp.name, "work"), "--run", "small",
                        "--output-repository", repo, "--samples-dir", samples,
                        "--videos-per-class", "4", "--epochs", "2", "--num-frames", "4",
                        "--crop-size", "32", "--resize-shorter-side", "32"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cls.server = subprocess.Popen(
            [SERVER, "--model-repository", repo, "--host", "127.0.0.1", "--grpc-port", "0",
             "--metrics-port", "0"], stdout=subprocess.PIPE, text=True)
        output = ""
        while not ("gRPC listening" in output and "metrics on" in output):
            line = cls.server.stdout.readline()
            if not line:
                raise RuntimeError(f"server did not start; it printed:\n{output}")
            output += line
        grpc_port = re.search(r"gRPC listening on [\d.]+:(\d+)", output).group(1)
        cls.metrics_port = int(re.search(r"metrics on http://[\d.]+:(\d+)/", output).group(1))
        cls.address = f"127.0.0.1:{grpc_port}"
        cls.video = glob.glob(os.path.join(samples, "fade_in.*"))[0]

        config = os.path.join(cls.tmp.name, "prometheus.yml")
        with open(config, "w") as f:
            yaml.safe_dump({
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [RULES],
                "scrape_configs": [{"job_name": "vidclf", "static_configs": [
                    {"targets": [f"127.0.0.1:{cls.metrics_port}"]}]}],
            }, f)
        cls.prometheus_port = free_port()
        cls.prometheus_log = open(os.path.join(cls.tmp.name, "prometheus.log"), "w")
        cls.prometheus = subprocess.Popen(
            ["prometheus", f"--config.file={config}",
             f"--storage.tsdb.path={os.path.join(cls.tmp.name, 'data')}",
             f"--web.listen-address=127.0.0.1:{cls.prometheus_port}"],
            stdout=cls.prometheus_log, stderr=subprocess.STDOUT)
        # Traffic while Prometheus scrapes: calls, a refused call and a live stream.
        deadline = time.time() + 60
        while time.time() < deadline:
            cls.client("classify", cls.video)
            cls.client("stream", cls.video, "--emit-every-frames", "4")
            if cls.query("sum(vidclf_requests_total)") and cls.query(
                    "vidclf:requests:rate5m") and cls.query("vidclf:batch_frames:avg_rate5m"):
                break
            time.sleep(0.5)
        cls.client("classify", os.path.join(SOURCE_DIR, "README.md"))  # INVALID_ARGUMENT

    @classmethod
    def tearDownClass(cls):
        cls.prometheus.send_signal(signal.SIGTERM)
        cls.prometheus.wait(timeout=30)
        cls.prometheus_log.close()
        cls.server.send_signal(signal.SIGTERM)
        cls.server.wait(timeout=30)
        cls.tmp.cleanup()

    @classmethod
    def client(cls, *arguments):
        subprocess.run([CLIENT, *arguments, "--server", cls.address], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)

    @classmethod
    def query_status(cls, expression):
        url = (f"http://127.0.0.1:{cls.prometheus_port}/api/v1/query?"
               + urllib.parse.urlencode({"query": expression}))
        try:
            return json.loads(http_get(url))
        except urllib.error.HTTPError as error:  # 400 for an expression that does not parse
            return json.loads(error.read().decode())
        except (urllib.error.URLError, ConnectionError):
            return {"status": "unreachable"}

    @classmethod
    def query(cls, expression):
        answer = cls.query_status(expression)
        return answer["data"]["result"] if answer.get("status") == "success" else []

    def test_every_metric_named_exists(self):
        page = http_get(f"http://127.0.0.1:{self.metrics_port}/metrics")
        exported = set(re.findall(r"^# TYPE (\S+)", page, re.M))
        exported |= {name for line in page.splitlines() if line and not line.startswith("#")
                     for name in [re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0)]}
        recorded = {rule["record"] for rule in rules() if "record" in rule}
        # Exported only when the models run on a CUDA device.
        gpu_only = {"vidclf_device_memory_bytes"}
        self.assertIn("vidclf_device_memory_bytes", open(
            os.path.join(SOURCE_DIR, "server/metrics.cc")).read())
        known = exported | recorded | gpu_only | {"up"}
        expressions = dashboard_expressions() + [rule["expr"] for rule in rules()]
        named = {name for e in expressions for name in METRIC_NAME.findall(e)}
        self.assertGreater(len(named), 15)
        self.assertEqual(sorted(named - known), [], "named in deploy/ but not exported")

    def test_every_dashboard_query_runs(self):
        expressions = dashboard_expressions()
        self.assertGreater(len(expressions), 15)
        for expression in expressions:
            answer = self.query_status(expression)
            self.assertEqual(answer.get("status"), "success", f"{expression}: {answer}")
        # The panels of a server that has served calls show numbers.
        for expression in expressions:
            if "vidclf_stage_duration_seconds_bucket" in expression or "process_resident" in \
                    expression or "vidclf_requests_total" in expression:
                self.assertTrue(self.query(expression), f"no data: {expression}")

    def test_recording_rules_produce_series_and_all_rules_evaluate(self):
        records = [rule["record"] for rule in rules() if "record" in rule]
        self.assertTrue(records)
        deadline = time.time() + 60
        missing = records
        while missing and time.time() < deadline:
            missing = [record for record in records if not self.query(record)]
            time.sleep(1)
        self.assertEqual(missing, [], "recording rules with no series")
        groups = json.loads(http_get(
            f"http://127.0.0.1:{self.prometheus_port}/api/v1/rules"))["data"]["groups"]
        loaded = [rule for group in groups for rule in group["rules"]]
        self.assertEqual(len(loaded), len(rules()))
        for rule in loaded:
            self.assertEqual(rule["health"], "ok", f"{rule['name']}: {rule.get('lastError')}")
        # A healthy, scraped server fires no alert but the ones about absence of load.
        alerts = json.loads(http_get(
            f"http://127.0.0.1:{self.prometheus_port}/api/v1/alerts"))["data"]["alerts"]
        self.assertFalse([a for a in alerts if a["labels"]["alertname"] in (
            "VidclfTargetDown", "VidclfAbsent")], alerts)


if __name__ == "__main__":
    unittest.main(verbosity=2)
