// Small python3 servers on loopback ports, for tests of what the server pulls from URIs.
#ifndef VIDCLF_TESTS_TEST_UTIL_PYTHON_SERVER_H_
#define VIDCLF_TESTS_TEST_UTIL_PYTHON_SERVER_H_

#include <netinet/in.h>
#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace vidclf::testing {

sockaddr_in Loopback(int port);
// The port a bound socket listens on.
int BoundPort(int fd);
// A loopback port that nothing listens on: the kernel's pick for port 0, released at once.
int UnusedLoopbackPort();
bool AcceptsConnections(int port);

// A python3 process serving on a loopback port, stopped when destroyed. Its stdout and stderr go
// to a log file; http.server logs every request it answers there.
class PythonServer {
 public:
  // Runs `python3 -u <arguments(port)>` for a free port and waits until the port accepts
  // connections; tries another port if the process exits first (someone took the port). Adds a
  // test failure and returns null when it does not start.
  static std::unique_ptr<PythonServer> Start(
      const std::function<std::vector<std::string>(int port)>& arguments,
      const std::string& log_path);

  ~PythonServer();
  PythonServer(const PythonServer&) = delete;
  PythonServer& operator=(const PythonServer&) = delete;

  int port() const { return port_; }
  // "http://127.0.0.1:PORT", without a trailing slash.
  std::string http() const;
  std::string log() const;

 private:
  PythonServer(pid_t pid, int port, std::string log_path)
      : pid_(pid), port_(port), log_path_(std::move(log_path)) {}

  pid_t pid_;
  int port_;
  std::string log_path_;
};

}  // namespace vidclf::testing

#endif  // VIDCLF_TESTS_TEST_UTIL_PYTHON_SERVER_H_
