#include "common/command_line.h"

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"

namespace vidclf {

std::vector<std::string> UnderscoreFlagNames(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& arg = args[i];
    if (arg == "--") break;  // everything after "--" is positional
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) continue;
    const size_t name_end = std::min(arg.find('='), arg.size());
    for (size_t c = 2; c < name_end; ++c) {
      if (arg[c] == '-') arg[c] = '_';
    }
  }
  return args;
}

std::vector<std::string> ParseCommandLine(int argc, char** argv, const char* usage) {
  absl::SetProgramUsageMessage(usage);
  std::vector<std::string> args = UnderscoreFlagNames(argc, argv);
  std::vector<char*> pointers;
  for (std::string& arg : args) pointers.push_back(arg.data());
  std::vector<char*> positional =
      absl::ParseCommandLine(static_cast<int>(pointers.size()), pointers.data());
  return {positional.begin(), positional.end()};
}

}  // namespace vidclf
