// The OpenBLAS kernels a program picks for itself: the ones OpenBLAS names, and never over the
// caller's own choice. That the server restarts with them is checked on a real server
// (ServerTest.RunsTheBlasKernelsOfThisCpu).
#include "model/library_settings.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "model/torch_threads.h"
#include "model/video_model.h"

namespace vidclf::model {
namespace {

TEST(LibrarySettingsTest, NamesTheKernelsOpenBlasRuns) {
  const std::string libraries = ConfigureTorchThreads(/*threads=*/0);  // 0 leaves the count
  if (libraries.find("openblas") == std::string::npos) GTEST_SKIP() << libraries;
  EXPECT_FALSE(OpenBlasCoreName().empty());
  EXPECT_NE(libraries.find("OpenBLAS kernels: " + OpenBlasCoreName()), std::string::npos);
}

TEST(LibrarySettingsTest, KeepsTheKernelsTheCallerChose) {
  const char* before = std::getenv("OPENBLAS_CORETYPE");
  const std::optional<std::string> saved =
      before == nullptr ? std::nullopt : std::optional<std::string>(before);
  setenv("OPENBLAS_CORETYPE", "Prescott", /*overwrite=*/1);
  EXPECT_EQ(OpenBlasCoreTypeForThisCpu(), std::nullopt);
  if (saved) {
    setenv("OPENBLAS_CORETYPE", saved->c_str(), /*overwrite=*/1);
  } else {
    unsetenv("OPENBLAS_CORETYPE");
  }
}

}  // namespace
}  // namespace vidclf::model
