// Memory that models hold on accelerators, for the server's gauges.
#ifndef VIDCLF_MODEL_DEVICE_MEMORY_H_
#define VIDCLF_MODEL_DEVICE_MEMORY_H_

#include <cstdint>
#include <string>
#include <vector>

namespace vidclf::model {

struct DeviceMemory {
  std::string device;  // "cuda:0"
  std::string kind;    // "allocated" (by tensors) or "reserved" (by LibTorch's caching allocator)
  int64_t bytes = 0;
};

// For every CUDA device this process sees, the bytes LibTorch's caching allocator has handed out
// and holds, zero on a device it has not used. Empty without CUDA (a CPU-only LibTorch, or no GPU).
std::vector<DeviceMemory> CudaMemoryInUse();

// Bytes tensors hold on CUDA device `index` now, and the most they held since the last
// ResetCudaPeak(index): what a benchmark reads around one run. Zero without CUDA.
struct CudaAllocation {
  int64_t current = 0;
  int64_t peak = 0;
};
CudaAllocation CudaAllocated(int index);
void ResetCudaPeak(int index);

}  // namespace vidclf::model

#endif  // VIDCLF_MODEL_DEVICE_MEMORY_H_
