#include "model/device_memory.h"

#include <torch/torch.h>

// CPU-only LibTorch ships the CUDA headers but not libc10_cuda: CMake defines this only when
// LibTorch was built with CUDA.
#ifdef VIDCLF_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace vidclf::model {

#ifdef VIDCLF_TORCH_CUDA
namespace {

struct AllocatorBytes {
  int64_t allocated = 0;
  int64_t reserved = 0;
  int64_t peak_allocated = 0;
};

// LibTorch's caching allocator sets itself up at the process's first CUDA allocation and, before
// that, throws "Invalid device argument" for every device: a CPU server on a GPU machine never
// allocates there, and its first /metrics scrape ended the process. Nothing is allocated yet.
AllocatorBytes BytesOn(int index) {
  try {
    const auto stats =
        c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(index));
    // Index 0 is StatType::AGGREGATE (all pools), whose namespace moved between LibTorch versions.
    return {stats.allocated_bytes[0].current, stats.reserved_bytes[0].current,
            stats.allocated_bytes[0].peak};
  } catch (const c10::Error&) {
    return {};
  }
}

}  // namespace
#endif

std::vector<DeviceMemory> CudaMemoryInUse() {
  std::vector<DeviceMemory> memory;
#ifdef VIDCLF_TORCH_CUDA
  if (!torch::cuda::is_available()) return memory;
  for (int i = 0; i < static_cast<int>(torch::cuda::device_count()); ++i) {
    const AllocatorBytes bytes = BytesOn(i);
    const std::string device = "cuda:" + std::to_string(i);
    memory.push_back({device, "allocated", bytes.allocated});
    memory.push_back({device, "reserved", bytes.reserved});
  }
#endif
  return memory;
}

CudaAllocation CudaAllocated(int index) {
  CudaAllocation allocation;
#ifdef VIDCLF_TORCH_CUDA
  const AllocatorBytes bytes = BytesOn(index);
  allocation.current = bytes.allocated;
  allocation.peak = bytes.peak_allocated;
#else
  (void)index;
#endif
  return allocation;
}

void ResetCudaPeak(int index) {
#ifdef VIDCLF_TORCH_CUDA
  try {
    c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(index));
  } catch (const c10::Error&) {
    // Not set up yet (see BytesOn): there is no peak to reset.
  }
#else
  (void)index;
#endif
}

}  // namespace vidclf::model
