#include "media/quoted_text.h"

#include <cstdint>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "media/uri_redaction.h"

namespace vidclf::media {
namespace {

// The length of the well-formed UTF-8 sequence at the start of `text`, or 0 when there is none
// (RFC 3629's table of well-formed byte sequences).
size_t Utf8SequenceLength(absl::string_view text) {
  const auto byte = [&text](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t lead = byte(0);
  if (lead < 0x80) return 1;
  size_t length = 0;
  uint8_t low = 0x80;
  uint8_t high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;   // overlong
    if (lead == 0xED) high = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;   // overlong
    if (lead == 0xF4) high = 0x8F;  // past U+10FFFF
  } else {
    return 0;
  }
  if (text.size() < length) return 0;
  if (byte(1) < low || byte(1) > high) return 0;
  for (size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return length;
}

bool IsControl(uint8_t byte) { return byte < 0x20 || byte == 0x7F; }

}  // namespace

bool IsValidUtf8(absl::string_view text) {
  while (!text.empty()) {
    const size_t length = Utf8SequenceLength(text);
    if (length == 0) return false;
    text.remove_prefix(length);
  }
  return true;
}

std::string ValidUtf8(absl::string_view text) {
  std::string valid;
  valid.reserve(text.size());
  while (!text.empty()) {
    const size_t length = Utf8SequenceLength(text);
    if (length == 0) {
      valid += "\xEF\xBF\xBD";  // U+FFFD
      text.remove_prefix(1);
    } else {
      valid.append(text.data(), length);
      text.remove_prefix(length);
    }
  }
  return valid;
}

std::string QuoteInput(absl::string_view text, size_t longest) {
  const bool cut = text.size() > longest;
  const std::string redacted = RedactSecrets(text.substr(0, longest));
  absl::string_view rest = redacted;
  std::string quoted = "'";
  while (!rest.empty()) {
    if (absl::StartsWith(rest, kEncodedNul)) {  // a NUL, as the door keeps one
      absl::StrAppend(&quoted, "\\x00");
      rest.remove_prefix(kEncodedNul.size());
      continue;
    }
    const size_t length = Utf8SequenceLength(rest);
    const auto byte = static_cast<uint8_t>(rest.front());
    if (length == 0 || (length == 1 && (IsControl(byte) || byte == '\\'))) {
      absl::StrAppend(&quoted, byte == '\\' ? "\\\\" : absl::StrFormat("\\x%02X", byte));
      rest.remove_prefix(1);
    } else {
      quoted.append(rest.data(), length);
      rest.remove_prefix(length);
    }
  }
  absl::StrAppend(&quoted, cut ? "...'" : "'");
  return quoted;
}

absl::Status CheckPlainText(absl::string_view field, absl::string_view text) {
  absl::string_view wrong;
  for (size_t i = 0; i < text.size() && wrong.empty(); ++i) {
    if (text[i] == '\0' || text.substr(i, kEncodedNul.size()) == kEncodedNul) {
      wrong = "a NUL byte";
    } else if (IsControl(static_cast<uint8_t>(text[i]))) {
      wrong = "a control character";
    }
  }
  if (wrong.empty() && !IsValidUtf8(text)) wrong = "bytes that are not UTF-8";
  if (wrong.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("the ", field, " ", QuoteInput(text), " holds ", wrong));
}

}  // namespace vidclf::media
