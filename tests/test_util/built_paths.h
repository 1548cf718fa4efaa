// Where the project's executables and sources are, found at run time from the test's own
// executable (CMake puts every executable in build/bin) rather than compiled in: no test object
// holds an absolute path, so a clone in another folder gets it from the compiler cache.
#ifndef VIDCLF_TESTS_TEST_UTIL_BUILT_PATHS_H_
#define VIDCLF_TESTS_TEST_UTIL_BUILT_PATHS_H_

#include <string>

namespace vidclf::testing {

std::string ServerBinary();  // vidclf-server, beside the test
std::string ClientBinary();  // vidclf
std::string TrainBinary();   // vidclf-train
std::string SourceDir();     // the checkout the test was built from

}  // namespace vidclf::testing

#endif  // VIDCLF_TESTS_TEST_UTIL_BUILT_PATHS_H_
