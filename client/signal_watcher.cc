#include "client/signal_watcher.h"

#include <unistd.h>

#include <chrono>
#include <utility>

namespace vidclf::client {
namespace {

// SIGINT and SIGTERM received so far. A lock-free atomic is all a signal handler may touch.
std::atomic<int> signals_received{0};

void CountSignal(int /*signal*/) {
  if (signals_received.fetch_add(1) > 0) _exit(kInterruptedExit);
}

}  // namespace

SignalWatcher::SignalWatcher(std::function<void()> on_signal) : on_signal_(std::move(on_signal)) {
  struct sigaction action = {};
  action.sa_handler = &CountSignal;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &old_sigint_);
  sigaction(SIGTERM, &action, &old_sigterm_);
  thread_ = std::thread([this] { Watch(); });
}

SignalWatcher::~SignalWatcher() {
  stop_ = true;
  thread_.join();
  sigaction(SIGINT, &old_sigint_, nullptr);
  sigaction(SIGTERM, &old_sigterm_, nullptr);
}

bool SignalWatcher::signalled() const { return signals_received > 0; }

void SignalWatcher::Watch() {
  while (!stop_) {
    if (signalled()) {
      on_signal_();
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace vidclf::client
