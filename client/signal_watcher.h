// Lets a long-running subcommand (stream, watch) stop cleanly on SIGINT or SIGTERM.
#ifndef VIDCLF_CLIENT_SIGNAL_WATCHER_H_
#define VIDCLF_CLIENT_SIGNAL_WATCHER_H_

#include <signal.h>

#include <atomic>
#include <functional>
#include <thread>

namespace vidclf::client {

// Exit status of a run stopped by SIGINT or SIGTERM, as shells report a process they interrupt.
inline constexpr int kInterruptedExit = 130;

// Turns SIGINT and SIGTERM into `on_signal`, called on a thread of its own (where it may take
// locks and call gRPC), while it lives. A second signal, when the first did not stop the
// command, ends the process at once. A handler rather than blocked signals: libraries start
// threads when they are loaded (OpenBLAS, under libavdevice's dependencies), before any mask.
class SignalWatcher {
 public:
  explicit SignalWatcher(std::function<void()> on_signal);
  ~SignalWatcher();
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

  bool signalled() const;

 private:
  void Watch();

  std::function<void()> on_signal_;
  struct sigaction old_sigint_ = {};
  struct sigaction old_sigterm_ = {};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace vidclf::client

#endif  // VIDCLF_CLIENT_SIGNAL_WATCHER_H_
