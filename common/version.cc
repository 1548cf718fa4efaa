#include "common/version.h"

#include "absl/strings/str_cat.h"
#include "common/build_info.h"

namespace vidclf {

std::string VersionText(absl::string_view program,
                        const std::vector<std::pair<std::string, std::string>>& libraries) {
  std::string text =
      absl::StrCat(program, " ", VIDCLF_VERSION, " (commit ", VIDCLF_GIT_COMMIT, ")");
  for (const auto& [name, version] : libraries) absl::StrAppend(&text, "\n", name, " ", version);
  return text;
}

}  // namespace vidclf
