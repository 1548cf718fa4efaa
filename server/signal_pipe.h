// SIGINT, SIGTERM and SIGHUP, delivered to the main thread through a pipe: the handler only
// writes the signal's number. (Blocking them for sigwait is not enough: libraries start threads
// before main, OpenBLAS's among them, and a signal the main thread no longer waits for would kill
// the process there.)
#ifndef VIDCLF_SERVER_SIGNAL_PIPE_H_
#define VIDCLF_SERVER_SIGNAL_PIPE_H_

namespace vidclf {

// Installs the handlers. Call once, early in main.
void HandleSignals();

// Blocks until the next signal arrives and returns it; SIGTERM if signals cannot be read.
int NextSignal();

}  // namespace vidclf

#endif  // VIDCLF_SERVER_SIGNAL_PIPE_H_
