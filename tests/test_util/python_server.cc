#include "tests/test_util/python_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tests/test_util/test_files.h"

namespace vidclf::testing {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kPython[] = "/usr/bin/python3";

}  // namespace

sockaddr_in Loopback(int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

int BoundPort(int fd) {
  sockaddr_in address{};
  socklen_t length = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  return ntohs(address.sin_port);
}

int UnusedLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = Loopback(0);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  const int port = BoundPort(fd);
  ::close(fd);
  return port;
}

bool AcceptsConnections(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = Loopback(port);
  const bool connected = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  ::close(fd);
  return connected;
}

std::unique_ptr<PythonServer> PythonServer::Start(
    const std::function<std::vector<std::string>(int port)>& arguments,
    const std::string& log_path) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    const int port = UnusedLoopbackPort();
    std::vector<std::string> args = {kPython, "-u"};
    for (std::string& arg : arguments(port)) args.push_back(std::move(arg));
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) break;
    if (pid == 0) {
      const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      const int null = ::open("/dev/null", O_RDONLY);
      ::dup2(null, STDIN_FILENO);
      ::dup2(log, STDOUT_FILENO);
      ::dup2(log, STDERR_FILENO);
      ::execv(kPython, argv.data());
      ::_exit(127);
    }
    std::unique_ptr<PythonServer> server(new PythonServer(pid, port, log_path));
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < deadline) {
      if (::waitpid(pid, nullptr, WNOHANG) == pid) {
        server->pid_ = -1;
        break;
      }
      if (AcceptsConnections(port)) return server;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ADD_FAILURE() << "python3 server did not start; its log:\n" << ReadFile(log_path);
  return nullptr;
}

PythonServer::~PythonServer() {
  if (pid_ < 0) return;
  ::kill(pid_, SIGTERM);
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (::waitpid(pid_, nullptr, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string PythonServer::http() const { return absl::StrCat("http://127.0.0.1:", port_); }

std::string PythonServer::log() const { return ReadFile(log_path_); }

}  // namespace vidclf::testing
