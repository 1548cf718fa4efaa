// Keeps the secrets a URI may carry (user info, query strings: passwords, signed-URL tokens) out
// of status messages and log lines.
#ifndef VIDCLF_MEDIA_URI_REDACTION_H_
#define VIDCLF_MEDIA_URI_REDACTION_H_

#include <string>

#include "absl/strings/string_view.h"

namespace vidclf::media {

// `uri` with its user info and its query replaced by "<redacted>":
// "https://<redacted>@host/a.mp4?<redacted>" for "https://user:secret@host/a.mp4?sig=abc".
// Everything else, the fragment included, stays as it was.
std::string RedactUri(absl::string_view uri);

// `text` with every URI in it ("scheme://..." up to a space, a quote or an angle bracket)
// redacted as RedactUri does, the query of every HTTP request line ("GET /a.m3u8?sig=..."), and
// the values of Authorization and Cookie headers: for messages and log lines of any origin
// (FFmpeg's HTTP protocol logs its requests whole at debug level).
std::string RedactSecrets(absl::string_view text);

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_URI_REDACTION_H_
