// Settings that LibTorch's libraries (OpenMP, OpenBLAS) read once, when they are loaded, before
// main: a program applies them by starting itself again with them in its environment.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace vidclf::model {

struct EnvironmentSetting {
  std::string name;
  std::string value;
};

// The kernels OpenBLAS runs ("SkylakeX", "Prescott"), or "" where OpenBLAS is not loaded.
std::string OpenBlasCoreName();

// OpenBLAS 0.3.20 to 0.3.23 (Debian bookworm has 0.3.21) take Intel CPUs newer than their tables,
// Emerald Rapids among them, for a Prescott and run their generic SSE3 kernels: a 2048x2048 float
// product ran at 63 GFLOP/s on two cores of an Emerald Rapids Xeon, and at 270 with
// OPENBLAS_CORETYPE=SkylakeX. Where OpenBLAS fell back so and the caller chose no kernels, returns
// the OPENBLAS_CORETYPE for what the CPU runs: SkylakeX with AVX-512 (F, BW, DQ, VL), Haswell
// with AVX2 and FMA. Nothing otherwise.
std::optional<EnvironmentSetting> OpenBlasCoreTypeForThisCpu();

// Sets each of `settings` that the environment does not have yet and, if any was new, starts this
// program again with `argv`, so that the libraries read them. Returns only when nothing was new or
// the restart failed; the program then goes on as it is.
void RestartWithSettings(const std::vector<EnvironmentSetting>& settings, char** argv);

// Starts this program again with OpenBlasCoreTypeForThisCpu(), where it returns a setting: for
// programs that time or train on the BLAS as the server runs it.
void RestartWithOpenBlasKernelsForThisCpu(char** argv);

}  // namespace vidclf::model
