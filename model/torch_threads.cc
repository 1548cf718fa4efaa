#include "model/torch_threads.h"

#include <torch/torch.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "model/library_settings.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace vidclf::model {
namespace {

// The path of the BLAS library this process loaded.
std::string BlasLibraryInUse() {
  // LibTorch does not say which BLAS it ended up with; the dynamic loader's map does. cuBLAS,
  // which a CUDA LibTorch maps, runs only the GPU's products.
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const size_t path = line.find('/');
    if (path != std::string::npos && line.find("blas", path) != std::string::npos &&
        line.find("cublas", path) == std::string::npos) {
      std::error_code error;
      const auto resolved = std::filesystem::canonical(line.substr(path), error);
      return error ? line.substr(path) : resolved.string();
    }
  }
  return "none loaded (LibTorch's own, where it was built in)";
}

}  // namespace

void SetIntraOpThreadsOfThisThread(int threads) {
  (void)torch::get_num_threads();  // the first parallel call: this thread takes the shared count
#ifdef _OPENMP
  omp_set_num_threads(threads);  // OpenMP keeps a count per thread; LibTorch reads it
#else
  torch::set_num_threads(threads);
#endif
}

std::string ConfigureTorchThreads(int threads) {
  if (threads > 0) torch::set_num_threads(threads);
  const std::string openblas_kernels = OpenBlasCoreName();
  return absl::StrCat(
      "LibTorch ", TORCH_VERSION, ", intra-op threads ", torch::get_num_threads(), ", BLAS ",
      BlasLibraryInUse(),
      openblas_kernels.empty() ? "" : " (OpenBLAS kernels: " + openblas_kernels + ")");
}

}  // namespace vidclf::model
