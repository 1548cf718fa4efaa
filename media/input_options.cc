#include "media/input_options.h"

#include <array>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace vidclf::media {
namespace {

struct AllowedOption {
  absl::string_view name;
  // Values allowed, alone or joined by '+'.
  std::vector<absl::string_view> values;
};

const std::array<AllowedOption, 2>& AllowedOptions() {
  static const auto* const kOptions = new std::array<AllowedOption, 2>{{
      {"rtsp_transport", {"udp", "tcp", "udp_multicast", "http", "https"}},
      {"rtsp_flags", {"prefer_tcp"}},
  }};
  return *kOptions;
}

bool IsRtsp(absl::string_view uri) {
  const std::string lower = absl::AsciiStrToLower(uri.substr(0, 8));
  return absl::StartsWith(lower, "rtsp://") || absl::StartsWith(lower, "rtsps://");
}

}  // namespace

absl::Status ValidateInputOptions(const InputOptions& options, absl::string_view uri) {
  for (const auto& [name, value] : options) {
    const AllowedOption* allowed = nullptr;
    for (const AllowedOption& option : AllowedOptions()) {
      if (option.name == name) allowed = &option;
    }
    if (allowed == nullptr) {
      std::vector<absl::string_view> names;
      for (const AllowedOption& option : AllowedOptions()) names.push_back(option.name);
      return absl::InvalidArgumentError(
          absl::StrCat("input_options: '", name.substr(0, 64), "' is not an input option a source ",
                       "may set (allowed: ", absl::StrJoin(names, ", "), ")"));
    }
    if (!IsRtsp(uri)) {
      return absl::InvalidArgumentError(
          absl::StrCat("input_options: ", name, " applies to rtsp:// and rtsps:// sources only"));
    }
    for (absl::string_view part : absl::StrSplit(value, '+')) {
      bool known = false;
      for (absl::string_view candidate : allowed->values) known = known || candidate == part;
      if (!known) {
        return absl::InvalidArgumentError(
            absl::StrCat("input_options: ", name, " may be ", absl::StrJoin(allowed->values, ", "),
                         " (several joined by '+'), not '", value.substr(0, 64), "'"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace vidclf::media
