// What `--version` prints for each executable: its name, the project's version and the commit it
// was built from, then each library it runs on with the version it was built against or loaded.
#ifndef VIDCLF_COMMON_VERSION_H_
#define VIDCLF_COMMON_VERSION_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace vidclf {

// "vidclf-server 0.9.0 (commit 1a2b3c4d5e6f)" and a line "LibTorch 1.13.1" per library.
std::string VersionText(absl::string_view program,
                        const std::vector<std::pair<std::string, std::string>>& libraries);

}  // namespace vidclf

#endif  // VIDCLF_COMMON_VERSION_H_
