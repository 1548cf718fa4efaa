// glibc's malloc set for tensors that are freed and made again at every step.
#ifndef VIDCLF_MODEL_TENSOR_HEAP_H_
#define VIDCLF_MODEL_TENSOR_HEAP_H_

namespace vidclf::model {

// A backbone batch's activations and the head states of many streams stepped together are tensors
// of a few MiB, freed and allocated again at every step. By default glibc maps such a block
// afresh each time, or hands the top of its heap back once 128 KiB lie free there, and the next
// allocation faults in zeroed pages: more than half of a causal-linear head's step at 16 streams
// (docs/streaming-benchmark.md). This keeps blocks of up to kTensorHeapMmapBytes in the heap and
// up to kTensorHeapTrimBytes free at its top. A long-running process should still hand freed
// memory back when idle (malloc_trim; the server's IdleMemoryReleaser). Call at start-up, before
// the threads that allocate. jemalloc, the server's default heap, is set up for the same
// tensors in server/heap.cc.
void TuneHeapForTensors();

inline constexpr int kTensorHeapMmapBytes = 32 << 20;
inline constexpr int kTensorHeapTrimBytes = 128 << 20;

}  // namespace vidclf::model

#endif  // VIDCLF_MODEL_TENSOR_HEAP_H_
