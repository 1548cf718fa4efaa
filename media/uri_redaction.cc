#include "media/uri_redaction.h"

#include <initializer_list>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace vidclf::media {
namespace {

constexpr absl::string_view kRedacted = "<redacted>";

bool IsSchemeChar(char c) { return absl::ascii_isalnum(c) || c == '+' || c == '-' || c == '.'; }

// Where a URI that starts at `start` of `text` ends: at whitespace, a quote or an angle bracket.
size_t UriEnd(absl::string_view text, size_t start) {
  size_t end = start;
  while (end < text.size() && !absl::ascii_isspace(text[end]) && text[end] != '\'' &&
         text[end] != '"' && text[end] != '<' && text[end] != '>') {
    ++end;
  }
  return end;
}

}  // namespace

std::string RedactUri(absl::string_view uri) {
  std::string redacted;
  const size_t separator = uri.find("://");
  size_t rest = 0;
  if (separator != absl::string_view::npos) {
    const size_t authority = separator + 3;
    const size_t authority_end = std::min(uri.find_first_of("/?#", authority), uri.size());
    const size_t at = uri.substr(0, authority_end).rfind('@');
    if (at != absl::string_view::npos && at >= authority) {
      absl::StrAppend(&redacted, uri.substr(0, authority), kRedacted);
      rest = at;
    }
  }
  const size_t fragment = std::min(uri.find('#', rest), uri.size());
  const size_t query = uri.substr(0, fragment).find('?', rest);
  if (query == absl::string_view::npos || query + 1 == fragment) {
    absl::StrAppend(&redacted, uri.substr(rest));
  } else {
    absl::StrAppend(&redacted, uri.substr(rest, query + 1 - rest), kRedacted, uri.substr(fragment));
  }
  return redacted;
}

namespace {

// Where the first of `needles` occurs in `text` from `from` (npos when none), and its size.
std::pair<size_t, size_t> FindFirst(absl::string_view text,
                                    std::initializer_list<absl::string_view> needles, size_t from) {
  std::pair<size_t, size_t> first = {absl::string_view::npos, 0};
  for (const absl::string_view needle : needles) {
    const size_t position = text.find(needle, from);
    if (position < first.first) first = {position, needle.size()};
  }
  return first;
}

// `text` with the target of every HTTP request line redacted as RedactUri does.
std::string RedactRequestLines(absl::string_view text) {
  std::string redacted;
  size_t copied = 0;
  while (true) {
    const auto [found, size] =
        FindFirst(text, {"GET /", "HEAD /", "POST /", "PUT /", "OPTIONS /"}, copied);
    if (found == absl::string_view::npos) break;
    const size_t target = found + size - 1;  // at the '/'
    const size_t end = UriEnd(text, target);
    absl::StrAppend(&redacted, text.substr(copied, target - copied),
                    RedactUri(text.substr(target, end - target)));
    copied = end;
  }
  absl::StrAppend(&redacted, text.substr(copied));
  return redacted;
}

// `text` with the value of every Authorization and Cookie header, to the end of its line, redacted.
std::string RedactCredentialHeaders(absl::string_view text) {
  std::string redacted;
  size_t copied = 0;
  const std::string lower = absl::AsciiStrToLower(text);
  while (true) {
    const auto [found, size] =
        FindFirst(lower, {"authorization:", "cookie:", "proxy-authorization:"}, copied);
    if (found == absl::string_view::npos) break;
    const size_t value = found + size;
    const size_t end = std::min(text.find_first_of("\r\n", value), text.size());
    absl::StrAppend(&redacted, text.substr(copied, value - copied), " ", kRedacted);
    copied = end;
  }
  absl::StrAppend(&redacted, text.substr(copied));
  return redacted;
}

// `text` with every "scheme://..." URI redacted.
std::string RedactUris(absl::string_view text) {
  std::string redacted;
  size_t copied = 0;
  for (size_t separator = text.find("://"); separator != absl::string_view::npos;
       separator = text.find("://", separator + 3)) {
    size_t start = separator;
    while (start > copied && IsSchemeChar(text[start - 1])) --start;
    if (start == separator) continue;  // no scheme before "://"
    const size_t end = UriEnd(text, separator);
    absl::StrAppend(&redacted, text.substr(copied, start - copied),
                    RedactUri(text.substr(start, end - start)));
    copied = end;
    separator = end - std::min<size_t>(end, 3);
  }
  absl::StrAppend(&redacted, text.substr(copied));
  return redacted;
}

}  // namespace

std::string RedactSecrets(absl::string_view text) {
  return RedactCredentialHeaders(RedactRequestLines(RedactUris(text)));
}

}  // namespace vidclf::media
