#include "tests/test_util/built_paths.h"

#include <filesystem>

namespace vidclf::testing {
namespace {

std::filesystem::path BinDir() {
  return std::filesystem::read_symlink("/proc/self/exe").parent_path();
}

}  // namespace

std::string ServerBinary() { return (BinDir() / "vidclf-server").string(); }
std::string ClientBinary() { return (BinDir() / "vidclf").string(); }
std::string TrainBinary() { return (BinDir() / "vidclf-train").string(); }

// VIDCLF_SOURCE_FROM_BIN: the checkout relative to build/bin ("../.."), the same in every clone.
std::string SourceDir() { return (BinDir() / VIDCLF_SOURCE_FROM_BIN).lexically_normal().string(); }

}  // namespace vidclf::testing
