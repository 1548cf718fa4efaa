#include "tests/test_util/server_process.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"

namespace vidclf::testing {

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(
    const std::string& binary, const std::vector<std::string>& arguments,
    const std::vector<std::string>& environment, int startup_seconds) {
  std::vector<std::string> args = {binary, "--grpc-port", "0", "--metrics-port", "0"};
  if (std::find(arguments.begin(), arguments.end(), "--host") == arguments.end()) {
    args.insert(args.end(), {"--host", "127.0.0.1"});
  }
  args.insert(args.end(), arguments.begin(), arguments.end());
  // Made before fork: the child of a threaded process should only exec.
  std::vector<std::string> env = environment;
  for (char** entry = environ; *entry != nullptr; ++entry) env.emplace_back(*entry);
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (std::string& entry : env) envp.push_back(entry.data());
  envp.push_back(nullptr);
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return absl::InternalError("pipe failed");
  const pid_t pid = ::fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    ::execve(binary.c_str(), argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  std::unique_ptr<ServerProcess> server(new ServerProcess());
  server->pid_ = pid;
  server->stdout_fd_ = pipe_fds[0];

  const std::regex grpc_line(R"(gRPC listening on [^:\s]+:(\d+))");
  const std::regex metrics_line(R"(metrics on https?://[^:\s]+:(\d+)/metrics)");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(startup_seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    std::smatch grpc_match, metrics_match;
    if (std::regex_search(server->output_, grpc_match, grpc_line) &&
        std::regex_search(server->output_, metrics_match, metrics_line)) {
      server->grpc_port_ = std::stoi(grpc_match[1]);
      server->metrics_port_ = std::stoi(metrics_match[1]);
      return server;
    }
    pollfd poll_fd{server->stdout_fd_, POLLIN, 0};
    if (::poll(&poll_fd, 1, 200) <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::read(server->stdout_fd_, buffer, sizeof(buffer));
    if (n <= 0) {
      return absl::InternalError(
          absl::StrCat("server exited during start-up; it printed:\n", server->output_));
    }
    server->output_.append(buffer, n);
  }
  return absl::DeadlineExceededError(
      absl::StrCat("server did not report its ports; it printed:\n", server->output_));
}

int ServerProcess::Stop() {
  if (pid_ < 0) return -1;
  ::kill(pid_, SIGTERM);
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (::waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      break;
    }
    ::usleep(20 * 1000);
  }
  pid_ = -1;
  char buffer[4096];
  ssize_t n = 0;
  while ((n = ::read(stdout_fd_, buffer, sizeof(buffer))) > 0) output_.append(buffer, n);
  // Whatever a test sent, no exception may have escaped a request's handling
  // (server/internal_errors.h logs each place's first at once).
  if (const size_t at = output_.find("internal error ("); at != std::string::npos) {
    ADD_FAILURE() << "the server logged an internal error: "
                  << output_.substr(at, output_.find('\n', at) - at);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void ServerProcess::Signal(int signal) {
  if (pid_ > 0) ::kill(pid_, signal);
}

bool ServerProcess::WaitForOutput(const std::string& text, int seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (output_.find(text) == std::string::npos) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    pollfd poll_fd{stdout_fd_, POLLIN, 0};
    if (::poll(&poll_fd, 1, 100) <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::read(stdout_fd_, buffer, sizeof(buffer));
    if (n <= 0) return output_.find(text) != std::string::npos;
    output_.append(buffer, n);
  }
  return true;
}

ServerProcess::~ServerProcess() {
  Stop();
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
}

int64_t ResidentBytes(pid_t pid) {
  std::ifstream statm(absl::StrCat("/proc/", pid, "/statm"));
  int64_t size_pages = 0;
  int64_t resident_pages = 0;
  if (!(statm >> size_pages >> resident_pages)) return -1;
  return resident_pages * ::sysconf(_SC_PAGESIZE);
}

int64_t PeakResidentBytesUntil(pid_t pid, const std::function<bool()>& done) {
  int64_t peak = ResidentBytes(pid);
  while (!done()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    peak = std::max(peak, ResidentBytes(pid));
  }
  return peak;
}

absl::StatusOr<std::string> HttpGet(int port, const std::string& path) {
  return HttpGet("127.0.0.1", port, path);
}

absl::StatusOr<std::string> HttpGet(const std::string& host, int port, const std::string& path) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("not an IPv4 address: ", host));
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket failed");
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("cannot connect to ", host, ":", port));
  }
  const std::string request = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", host, "\r\n\r\n");
  ::send(fd, request.data(), request.size(), 0);
  std::string response;
  char buffer[8192];
  ssize_t n = 0;
  while ((n = ::recv(fd, buffer, sizeof(buffer), 0)) > 0) response.append(buffer, n);
  ::close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (response.compare(0, 12, "HTTP/1.1 200") != 0 &&
      response.compare(0, 12, "HTTP/1.0 200") != 0) {
    return absl::InternalError(absl::StrCat("GET ", path, " answered: ", response.substr(0, 80)));
  }
  return body == std::string::npos ? "" : response.substr(body + 4);
}

double MetricValue(const std::string& page, const std::string& name) {
  std::istringstream lines(page);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name, 0) == 0 && line.size() > name.size() &&
        (line[name.size()] == ' ' || line[name.size()] == '{')) {
      return std::stod(line.substr(line.rfind(' ') + 1));
    }
  }
  return -1;
}

}  // namespace vidclf::testing
