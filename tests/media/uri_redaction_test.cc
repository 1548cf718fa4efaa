// URIs in messages and log lines keep their user info and query strings to themselves.
#include "media/uri_redaction.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "media/uri_allowlist.h"

namespace vidclf::media {
namespace {

TEST(UriRedactionTest, RedactsUserInfoAndQueryKeepingTheRest) {
  EXPECT_EQ(RedactUri("https://user:secret@cdn.example.com:8443/a/b.mp4?sig=abc&x=1#t=3"),
            "https://<redacted>@cdn.example.com:8443/a/b.mp4?<redacted>#t=3");
  EXPECT_EQ(RedactUri("rtsp://admin:hunter2@10.0.0.7/stream"), "rtsp://<redacted>@10.0.0.7/stream");
  EXPECT_EQ(RedactUri("http://host/path/x.ts?token=abc"), "http://host/path/x.ts?<redacted>");
  EXPECT_EQ(RedactUri("http://host/a@b.mp4"), "http://host/a@b.mp4");  // '@' in the path
  EXPECT_EQ(RedactUri("file:///videos/clip.mp4"), "file:///videos/clip.mp4");
  EXPECT_EQ(RedactUri("http://host/x.mp4?"), "http://host/x.mp4?");
  EXPECT_EQ(RedactUri("not a uri"), "not a uri");
}

TEST(UriRedactionTest, RedactsEveryUriInAText) {
  EXPECT_EQ(RedactSecrets("Opening 'http://u:p@a.example/x.m3u8?k=1' for reading, then "
                          "https://b.example/seg.ts?sig=2 and \"rtsp://v:w@c.example/s\"."),
            "Opening 'http://<redacted>@a.example/x.m3u8?<redacted>' for reading, then "
            "https://b.example/seg.ts?<redacted> and \"rtsp://<redacted>@c.example/s\".");
  EXPECT_EQ(RedactSecrets("no uri here: just text :// and ://x"),
            "no uri here: just text :// and ://x");
}

TEST(UriRedactionTest, RedactsHttpRequestTargetsAndCredentialHeaders) {
  // FFmpeg's HTTP protocol logs each request whole at debug level.
  EXPECT_EQ(RedactSecrets("request: GET /live/index.m3u8?token=abc HTTP/1.1\r\nUser-Agent: Lavf\r\n"
                          "Authorization: Basic dXNlcjpzZWNyZXQ=\r\nCookie: session=42\r\n"),
            "request: GET /live/index.m3u8?<redacted> HTTP/1.1\r\nUser-Agent: Lavf\r\n"
            "Authorization: <redacted>\r\nCookie: <redacted>\r\n");
  EXPECT_EQ(RedactSecrets("GET /plain.mp4 HTTP/1.1"), "GET /plain.mp4 HTTP/1.1");
}

TEST(UriRedactionTest, AllowlistRefusalsDoNotEchoSecrets) {
  const UriAllowlist allowlist = *UriAllowlist::Parse({"https://allowed.example/"});
  for (const char* uri : {"https://user:secret@other.example/a.mp4?token=secret",
                          "https://user:secret@allowed.example/../a.mp4?token=secret",
                          "https://user:secret@allowed.example/%2e%2e/a.mp4"}) {
    const absl::Status status = allowlist.Check(uri);
    EXPECT_FALSE(status.ok()) << uri;
    EXPECT_FALSE(absl::StrContains(status.message(), "secret")) << status;
  }
  const absl::Status empty = UriAllowlist().Check("https://user:secret@host/a.mp4");
  EXPECT_FALSE(absl::StrContains(empty.message(), "secret")) << empty;
}

}  // namespace
}  // namespace vidclf::media
