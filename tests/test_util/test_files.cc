#include "tests/test_util/test_files.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

namespace vidclf::testing {

std::string MakeScratchDir(const std::string& name) {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  // A parameterized test's name has a '/' ("Case/3"): one directory level, so that the caller's
  // removal of what this returns leaves nothing behind.
  std::string test_name = test ? std::string(test->name()) : "suite";
  std::replace(test_name.begin(), test_name.end(), '/', '-');
  std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) /
      ("vidclf_" + std::to_string(::getpid()) + "_" + test_name + "_" + name);
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

std::string CachedVideo(const std::string& arguments, const std::string& extension) {
  const std::filesystem::path cache =
      std::filesystem::path(::testing::TempDir()) / "vidclf_video_cache";
  std::filesystem::create_directories(cache);
  const std::filesystem::path path =
      cache / (std::to_string(std::hash<std::string>()(arguments)) + extension);
  if (std::filesystem::exists(path)) return path.string();
  // Made under a name of this process's own, then renamed: tests running side by side may make
  // the same file at once, and each must see it whole or not at all.
  const std::string partial = path.string() + "." + std::to_string(::getpid()) + extension;
  MakeVideo(arguments, partial);
  std::filesystem::rename(partial, path);
  return path.string();
}

std::vector<std::string> DistinctClips(const std::string& dir) {
  std::vector<std::string> clips;
  for (const char* source : {"testsrc2", "smptebars", "mandelbrot", "rgbtestsrc"}) {
    const std::string path = dir + "/" + source + ".mp4";
    MakeVideo(std::string("-f lavfi -i ") + source +
                  "=size=160x120:rate=10 -frames:v 30 -c:v libx264 -g 10",
              path);
    clips.push_back(ReadFile(path));
  }
  return clips;
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << file.rdbuf();
  return bytes.str();
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
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
