#include "model/device_memory.h"

#include <torch/torch.h>

// CPU-only LibTorch ships the CUDA headers but not libc10_cuda: CMake defines this only when
// LibTorch was built with CUDA.
#ifdef VIDCLF_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace vidclf::model {

std::vector<DeviceMemory> CudaMemoryInUse() {
  std::vector<DeviceMemory> memory;
#ifdef VIDCLF_TORCH_CUDA
  if (!torch::cuda::is_available()) return memory;
  for (int64_t i = 0; i < static_cast<int64_t>(torch::cuda::device_count()); ++i) {
    const auto stats =
        c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(i));
    // Index 0 is StatType::AGGREGATE (all pools), whose namespace moved between LibTorch versions.
    const std::string device = "cuda:" + std::to_string(i);
    memory.push_back({device, "allocated", stats.allocated_bytes[0].current});
    memory.push_back({device, "reserved", stats.reserved_bytes[0].current});
  }
#endif
  return memory;
}

CudaAllocation CudaAllocated(int index) {
  CudaAllocation allocation;
#ifdef VIDCLF_TORCH_CUDA
  const auto stats =
      c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(index));
  allocation.current = stats.allocated_bytes[0].current;
  allocation.peak = stats.allocated_bytes[0].peak;
#else
  (void)index;
#endif
  return allocation;
}

void ResetCudaPeak(int index) {
#ifdef VIDCLF_TORCH_CUDA
  c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(index));
#else
  (void)index;
#endif
}

}  // namespace vidclf::model
