// Test data made at test time: videos from the ffmpeg CLI, scratch directories, file contents.
#ifndef VIDCLF_TESTS_TEST_UTIL_TEST_FILES_H_
#define VIDCLF_TESTS_TEST_UTIL_TEST_FILES_H_

#include <string>

namespace vidclf::testing {

// A fresh directory under the test's temporary directory, removed by the caller's fixture.
std::string MakeScratchDir(const std::string& name);

// Runs `ffmpeg -y -loglevel error <arguments> <output>` and fails the current test if it fails.
// Example: MakeVideo("-f lavfi -i testsrc2=size=320x240:rate=10 -frames:v 30 -c:v mpeg4", path).
void MakeVideo(const std::string& arguments, const std::string& output);

std::string ReadFile(const std::string& path);

// Runs a shell command and returns its standard output; `exit_code` gets its exit status.
std::string RunCommand(const std::string& command, int* exit_code);

}  // namespace vidclf::testing

#endif  // VIDCLF_TESTS_TEST_UTIL_TEST_FILES_H_
