// Text that came from outside (a path, a header, a query value, a name in a request) made safe
// to repeat: in a status message, a JSON body or a log line it is valid UTF-8, bounded in length
// and free of the secrets a URI may carry, whatever bytes the client sent.
#ifndef VIDCLF_MEDIA_QUOTED_TEXT_H_
#define VIDCLF_MEDIA_QUOTED_TEXT_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace vidclf::media {

// Where a NUL was in a text that travels as a C string (libmicrohttpd's decoded path and query):
// modified UTF-8's two bytes for U+0000, which are not UTF-8, so that the text is refused rather
// than cut short at the NUL.
inline constexpr absl::string_view kEncodedNul = "\xC0\x80";

// Whether `text` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool IsValidUtf8(absl::string_view text);

// `text` with each byte that is not part of well-formed UTF-8 replaced by U+FFFD.
std::string ValidUtf8(absl::string_view text);

// `text` quoted for a message: 'like this', secrets redacted (media::RedactSecrets), cut after
// `longest` bytes ("..." then says so), control characters and bytes that are not UTF-8 written
// as \xNN escapes (kEncodedNul as \x00). The result is valid UTF-8, printable and at most about 4 x
// `longest` bytes.
std::string QuoteInput(absl::string_view text, size_t longest = 64);

// OK when `text`, the value of the request's `field` ("model name", "version", ...), is valid
// UTF-8 without NUL or other control characters; otherwise INVALID_ARGUMENT naming the field and
// what is wrong, with the text quoted by QuoteInput.
absl::Status CheckPlainText(absl::string_view field, absl::string_view text);

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_QUOTED_TEXT_H_
