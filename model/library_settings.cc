#include "model/library_settings.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace vidclf::model {

std::string OpenBlasCoreName() {
  using CoreName = char* (*)();
  // Looked up, not linked: the BLAS in use is whichever libblas.so.3 the system provides.
  auto* core_name = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  return core_name == nullptr ? "" : core_name();
}

std::optional<EnvironmentSetting> OpenBlasCoreTypeForThisCpu() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr || OpenBlasCoreName() != "Prescott") {
    return std::nullopt;
  }
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
    return EnvironmentSetting{"OPENBLAS_CORETYPE", "SkylakeX"};
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    return EnvironmentSetting{"OPENBLAS_CORETYPE", "Haswell"};
  }
#endif
  return std::nullopt;
}

void RestartWithSettings(const std::vector<EnvironmentSetting>& settings, char** argv) {
  bool changed = false;
  for (const EnvironmentSetting& setting : settings) {
    if (std::getenv(setting.name.c_str()) != nullptr) continue;
    setenv(setting.name.c_str(), setting.value.c_str(), /*overwrite=*/1);
    changed = true;
  }
  if (!changed) return;
  // The executable's own path rather than /proc/self/exe, whose name ("exe") the kernel would
  // give the process: `pgrep vidclf-server` and `top` find it by that name.
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  const bool usable = !error && std::filesystem::exists(self, error);  // not deleted since
  execv(usable ? self.c_str() : "/proc/self/exe", argv);               // returns only on failure
}

void RestartWithOpenBlasKernelsForThisCpu(char** argv) {
  if (auto core_type = OpenBlasCoreTypeForThisCpu()) RestartWithSettings({*core_type}, argv);
}

}  // namespace vidclf::model
