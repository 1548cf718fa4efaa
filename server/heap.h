// The server's heap: jemalloc in the default build (-DVIDCLF_JEMALLOC=ON), else glibc's malloc.
//
// glibc's arenas keep some of what each camera reconnect frees, although the server holds none
// of it; jemalloc does not (docs/cameras-benchmark.md, "Reconnects").
#ifndef VIDCLF_SERVER_HEAP_H_
#define VIDCLF_SERVER_HEAP_H_

#include <string>

namespace vidclf::heap {

// Sets the heap up for the server; call at start-up, before the threads that allocate. On glibc:
// every thread on the main arena, the one whose free top ReleaseFree can hand back, and the
// thresholds of model/tensor_heap.h. jemalloc is set up by its own configuration (heap.cc).
void Prepare();

// Hands memory that is free in the heap back to the system, now.
void ReleaseFree();

// The allocator and its version, for the start-up log: "jemalloc 5.3.0-0-g54eaed1d..." or "glibc".
std::string Describe();

}  // namespace vidclf::heap

#endif  // VIDCLF_SERVER_HEAP_H_
