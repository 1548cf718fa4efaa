#include "tests/test_util/test_files.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace vidclf::testing {

std::string MakeScratchDir(const std::string& name) {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) /
                              ("vidclf_" + std::to_string(::getpid()) + "_" +
                               (test ? std::string(test->name()) : "suite") + "_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

void MakeVideo(const std::string& arguments, const std::string& output) {
  int exit_code = 0;
  const std::string log = RunCommand(
      "ffmpeg -nostdin -y -loglevel error " + arguments + " '" + output + "' 2>&1", &exit_code);
  ASSERT_EQ(exit_code, 0) << "ffmpeg " << arguments << " failed: " << log;
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << file.rdbuf();
  return bytes.str();
}

std::string RunCommand(const std::string& command, int* exit_code) {
  std::string output;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    *exit_code = -1;
    return output;
  }
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
  const int status = ::pclose(pipe);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return output;
}

}  // namespace vidclf::testing
