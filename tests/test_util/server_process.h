// Runs the real vidclf-server binary as a child process on ephemeral loopback ports.
#ifndef VIDCLF_TESTS_TEST_UTIL_SERVER_PROCESS_H_
#define VIDCLF_TESTS_TEST_UTIL_SERVER_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace vidclf::testing {

class ServerProcess {
 public:
  // Starts `binary` with `arguments` plus --grpc-port 0 --metrics-port 0 (and --host 127.0.0.1
  // unless they name a --host), in this
  // process's environment plus `environment` ("NAME=value" entries, which win over it), and waits
  // (up to `startup_seconds`) until it prints the ports it listens on.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(
      const std::string& binary, const std::vector<std::string>& arguments,
      const std::vector<std::string>& environment = {}, int startup_seconds = 120);

  // Sends SIGTERM and waits for the exit; SIGKILL if it takes over 30 s.
  ~ServerProcess();

  std::string grpc_address() const { return "127.0.0.1:" + std::to_string(grpc_port_); }
  int metrics_port() const { return metrics_port_; }
  pid_t pid() const { return pid_; }
  // Everything the server printed to stdout so far.
  const std::string& output() const { return output_; }
  // Sends SIGTERM and returns the exit status (-1 if it did not exit normally).
  int Stop();
  // Sends `signal` (SIGHUP, SIGTERM, ...) without waiting.
  void Signal(int signal);
  // Reads the server's output until it holds `text`, for up to `seconds`; false if it never does.
  bool WaitForOutput(const std::string& text, int seconds);

 private:
  ServerProcess() = default;

  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  int grpc_port_ = 0;
  int metrics_port_ = 0;
  std::string output_;
};

// The resident memory of process `pid` now, from /proc; -1 when it cannot be read.
int64_t ResidentBytes(pid_t pid);
// The most resident memory process `pid` had, sampled every 10 ms until `done` is true.
int64_t PeakResidentBytesUntil(pid_t pid, const std::function<bool()>& done);

// A plain HTTP/1.0 GET on 127.0.0.1; returns the body of a 200 response.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path);
// The same at an IPv4 `host` ("127.0.0.2") other than 127.0.0.1.
absl::StatusOr<std::string> HttpGet(const std::string& host, int port, const std::string& path);

// The value of the first sample of `name` (with any labels) on a /metrics page; -1 if absent.
double MetricValue(const std::string& page, const std::string& name);

}  // namespace vidclf::testing

#endif  // VIDCLF_TESTS_TEST_UTIL_SERVER_PROCESS_H_
