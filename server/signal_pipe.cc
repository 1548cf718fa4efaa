#include "server/signal_pipe.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <initializer_list>

namespace vidclf {
namespace {

int signal_pipe[2] = {-1, -1};

void OnSignal(int signal) {
  const char number = static_cast<char>(signal);
  [[maybe_unused]] const ssize_t written = write(signal_pipe[1], &number, 1);
}

}  // namespace

void HandleSignals() {
  if (pipe2(signal_pipe, O_CLOEXEC) != 0) return;
  struct sigaction action = {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (const int signal : {SIGINT, SIGTERM, SIGHUP}) sigaction(signal, &action, nullptr);
}

int NextSignal() {
  char number = 0;
  while (true) {
    const ssize_t n = read(signal_pipe[0], &number, 1);
    if (n == 1) return number;
    if (n < 0 && errno == EINTR) continue;
    return SIGTERM;
  }
}

}  // namespace vidclf
