#include "media/av_util.h"

#include "absl/strings/str_cat.h"

extern "C" {
#include <libavutil/error.h>
}

namespace vidclf::media {

std::string AvErrorText(int error_code) {
  char text[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(error_code, text, sizeof(text));
  return text;
}

absl::Status AvError(absl::StatusCode code, absl::string_view what, int error_code) {
  return absl::Status(code, absl::StrCat(what, ": ", AvErrorText(error_code)));
}

}  // namespace vidclf::media
