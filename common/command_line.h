// Command-line helpers shared by the vidclf executables.
#ifndef VIDCLF_COMMON_COMMAND_LINE_H_
#define VIDCLF_COMMON_COMMAND_LINE_H_

#include <string>
#include <vector>

namespace vidclf {

// Abseil flags are named with underscores; our documented flags use dashes (--model-repository).
// Returns argv with the dashes inside each "--flag-name" (before any '=') turned into underscores,
// so both spellings work. Positional arguments and flag values are left alone.
std::vector<std::string> UnderscoreFlagNames(int argc, char** argv);

// Parses flags from `argc`/`argv` (either spelling), sets the usage message, and returns the
// positional arguments, program name first.
std::vector<std::string> ParseCommandLine(int argc, char** argv, const char* usage);

}  // namespace vidclf

#endif  // VIDCLF_COMMON_COMMAND_LINE_H_
