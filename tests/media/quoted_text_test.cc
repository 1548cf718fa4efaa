// Text a client sent, repeated in a message, is valid UTF-8, bounded and printable, whatever the
// bytes; names holding NUL, control characters or bytes that are not UTF-8 are refused.
#include "media/quoted_text.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace vidclf::media {
namespace {

TEST(QuotedTextTest, TellsWellFormedUtf8FromTheRest) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("demo"));
  EXPECT_TRUE(IsValidUtf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x8E\xA5"));  // é € 🎥
  EXPECT_FALSE(IsValidUtf8("\xFF"));
  EXPECT_FALSE(IsValidUtf8("\xFF\xFE"));
  EXPECT_FALSE(IsValidUtf8("\xC3"));                    // cut short
  EXPECT_FALSE(IsValidUtf8(std::string(kEncodedNul)));  // overlong NUL
  EXPECT_FALSE(IsValidUtf8("\xE0\x80\xAF"));            // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));            // a surrogate
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));        // past U+10FFFF
}

TEST(QuotedTextTest, ReplacesWhatIsNotUtf8) {
  EXPECT_EQ(ValidUtf8("a\xFF"
                      "b"),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(ValidUtf8("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_TRUE(IsValidUtf8(ValidUtf8("\xC3\xFF\xED\xA0\x80\xF0\x9F")));
}

TEST(QuotedTextTest, QuotesPrintablyBoundedAndRedacted) {
  EXPECT_EQ(QuoteInput("demo"), "'demo'");
  EXPECT_EQ(QuoteInput("live\xFF"), "'live\\xFF'");
  EXPECT_EQ(QuoteInput(std::string("a\0b\n", 4)), "'a\\x00b\\x0A'");
  EXPECT_EQ(QuoteInput("caf\xC3\xA9"), "'caf\xC3\xA9'");
  EXPECT_EQ(QuoteInput(absl::StrCat("demo", kEncodedNul, "x")), "'demo\\x00x'");
  EXPECT_EQ(QuoteInput(std::string(100, 'x'), 8), "'xxxxxxxx...'");
  const std::string secret = QuoteInput("rtsp://admin:hunter2@cam/s?token=abc");
  EXPECT_FALSE(absl::StrContains(secret, "hunter2")) << secret;
  EXPECT_FALSE(absl::StrContains(secret, "abc")) << secret;
  // Whatever the bytes, the quote is valid UTF-8 without control characters.
  std::string every_byte;
  for (int byte = 0; byte < 256; ++byte) every_byte.push_back(static_cast<char>(byte));
  const std::string quoted = QuoteInput(every_byte, every_byte.size());
  EXPECT_TRUE(IsValidUtf8(quoted));
  for (char c : quoted) EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 || c == 0x7F);
}

TEST(QuotedTextTest, NamesAreCheckedNamingTheField) {
  EXPECT_TRUE(CheckPlainText("model name", "demo-transformer").ok());
  EXPECT_TRUE(CheckPlainText("model name", "caf\xC3\xA9").ok());
  const absl::Status nul = CheckPlainText("model name", std::string("demo\0x", 6));
  EXPECT_EQ(nul.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(nul.message(), "model name")) << nul;
  EXPECT_TRUE(absl::StrContains(nul.message(), "NUL")) << nul;
  EXPECT_TRUE(absl::StrContains(
      CheckPlainText("path", absl::StrCat("/demo", kEncodedNul, "x")).message(), "NUL"));
  EXPECT_TRUE(
      absl::StrContains(CheckPlainText("version", "1\x1b[31m").message(), "control character"));
  const absl::Status bytes = CheckPlainText("query parameter attention", "\xFF");
  EXPECT_TRUE(absl::StrContains(bytes.message(), "query parameter attention")) << bytes;
  EXPECT_TRUE(absl::StrContains(bytes.message(), "not UTF-8")) << bytes;
  EXPECT_TRUE(IsValidUtf8(bytes.message()));
}

}  // namespace
}  // namespace vidclf::media
