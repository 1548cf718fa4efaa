// ListSources's page tokens are opaque: only those this process issued, for the same filter and
// page size, are read.
#include "server/sources/page_tokens.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace vidclf::sources {
namespace {

TEST(PageTokensTest, ReadsWhatItIssued) {
  const PageTokens tokens;
  const std::string token = tokens.Issue("cam-7", "labels.site=north", 2);
  EXPECT_FALSE(absl::StrContains(token, "cam-7")) << "opaque";
  absl::StatusOr<std::string> last = tokens.Read(token, "labels.site=north", 2);
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(*last, "cam-7");
}

TEST(PageTokensTest, RefusesForgedTamperedAndOtherRequestsTokens) {
  const PageTokens tokens;
  const std::string token = tokens.Issue("cam-7", "", 2);
  std::string tampered = token;
  tampered[tampered.size() / 2] = tampered[tampered.size() / 2] == 'A' ? 'B' : 'A';
  for (const auto& [forged, filter, size] : std::vector<std::tuple<std::string, std::string, int>>{
           {"garbage-token", "", 2},
           {"cam-7", "", 2},
           {"", "", 2},
           {tampered, "", 2},
           {token, "", 3},                               // another page size
           {token, "labels.site=north", 2},              // another filter
           {PageTokens().Issue("cam-7", "", 2), "", 2},  // another process's key
       }) {
    const absl::StatusOr<std::string> read = tokens.Read(forged, filter, size);
    EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument) << forged;
    EXPECT_TRUE(absl::StrContains(read.status().message(), "page_token")) << read.status();
  }
}

}  // namespace
}  // namespace vidclf::sources
