"""What the Python integration tests share: a tiny model repository trained for the test, a real
vidclf-server on loopback, and plain HTTP requests to it."""
import glob
import os
import re
import signal
import subprocess
import urllib.error
import urllib.request


def train_small_repository(train_binary, work_dir):
    """Trains a tiny bundle, "small" (four frames of 32x32), into WORK_DIR/repo; returns the
    repository and one of its held-out samples (a fade_in video), the tests' input."""
    repository = os.path.join(work_dir, "repo")
    samples = os.path.join(work_dir, "samples")
    subprocess.run([train_binary, "all", "--synthesize", "--data", os.path.join(work_dir, "data"),
                    "--work", os.path.join(work_dir, "work"), "--run", "small",
                    "--output-repository", repository, "--samples-dir", samples,
                    "--videos-per-class", "4", "--epochs", "2", "--num-frames", "4",
                    "--crop-size", "32", "--resize-shorter-side", "32"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return repository, glob.glob(os.path.join(samples, "fade_in.*"))[0]


def start_server(server_binary, repository, *flags):
    """Starts the server on loopback; returns the process and its gRPC and metrics ports, and
    its HTTP port when it has one."""
    server = subprocess.Popen(
        [server_binary, "--model-repository", repository, "--host", "127.0.0.1", "--grpc-port",
         "0", "--metrics-port", "0", *flags], stdout=subprocess.PIPE, text=True)
    output = ""
    while not ("gRPC listening" in output and "metrics on" in output):
        # Blocks until the server prints or exits; ctest's timeout bounds a hang.
        line = server.stdout.readline()
        if not line:
            raise RuntimeError(f"server did not start; it printed:\n{output}")
        output += line
    grpc_port = int(re.search(r"gRPC listening on [\d.]+:(\d+)", output).group(1))
    metrics_port = int(re.search(r"metrics on http://[\d.]+:(\d+)/", output).group(1))
    http = re.search(r"HTTP listening on [\d.]+:(\d+)", output)
    if http:
        return server, grpc_port, metrics_port, int(http.group(1))
    return server, grpc_port, metrics_port


def stop_server(server):
    """Stops the server with SIGTERM; it must exit 0 having logged no internal error (an
    exception that escaped a request's handling: server/internal_errors.h), whatever its test
    sent it."""
    server.send_signal(signal.SIGTERM)
    rest = server.stdout.read()
    assert server.wait(timeout=30) == 0, "server did not shut down cleanly"
    server.stdout.close()
    internal = [line for line in rest.splitlines() if "internal error (" in line]
    assert not internal, f"the server logged internal errors: {internal[:3]}"


def http(port, path, body=None, headers=None, method=None):
    """(status, headers, body) of an HTTP request to the server on loopback."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body,
                                     headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()
