// Test data made at test time: videos from the ffmpeg CLI, scratch directories, file contents.
#ifndef VIDCLF_TESTS_TEST_UTIL_TEST_FILES_H_
#define VIDCLF_TESTS_TEST_UTIL_TEST_FILES_H_

#include <string>
#include <vector>

namespace vidclf::testing {

// A fresh directory under the test's temporary directory, removed by the caller's fixture.
std::string MakeScratchDir(const std::string& name);

// Runs `ffmpeg -y -loglevel error <arguments> <output>` and fails the current test if it fails.
// Example: MakeVideo("-f lavfi -i testsrc2=size=320x240:rate=10 -frames:v 30 -c:v mpeg4", path).
void MakeVideo(const std::string& arguments, const std::string& output);

// A video made by MakeVideo(arguments, ...) once and kept under the test temporary directory, for
// videos that take seconds to encode and that several test processes use; returns its path.
// `extension` (".mp4") tells ffmpeg the container.
std::string CachedVideo(const std::string& arguments, const std::string& extension);

// The bytes of four short H.264 MP4 clips (3 s at 10 fps, 160x120) of different content, made in
// `dir`, so that each is classified differently.
std::vector<std::string> DistinctClips(const std::string& dir);

std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& bytes);

// Runs a shell command and returns its standard output; `exit_code` gets its exit status.
std::string RunCommand(const std::string& command, int* exit_code);

}  // namespace vidclf::testing

#endif  // VIDCLF_TESTS_TEST_UTIL_TEST_FILES_H_
