// Inputs that refer to other resources (playlists, manifests, scripts) open nothing when they are
// uploaded, and nothing past the allowlist when they are pulled from a URI. Each names a real
// MPEG-TS segment on a python http.server that records every request: were the reference
// followed, the decode would succeed from that server's bytes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "media/clip_decoder.h"
#include "media/uri_allowlist.h"
#include "tests/test_util/decode_sources.h"
#include "tests/test_util/python_server.h"
#include "tests/test_util/test_files.h"

namespace vidclf::media {
namespace {

using testing::DecodeUri;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::PythonServer;

// A resource-referencing input whose references all point at `target` ("http://host:port"). IMF
// is refused too (media/input_formats.h), but FFmpeg never probes its experimental demuxer.
struct ReferencingInput {
  std::string format;  // FFmpeg's name for it, which the refusal names
  std::string file_name;
  std::string (*make)(const std::string& target);
  bool refused_for_uri;  // false: allowed from URIs, where each reference passes the allowlist
};

std::string DashManifest(const std::string& target) {
  return absl::StrCat(
      "<?xml version=\"1.0\"?>\n"
      "<MPD xmlns=\"urn:mpeg:dash:schema:mpd:2011\" type=\"static\" "
      "mediaPresentationDuration=\"PT1S\" minBufferTime=\"PT1S\" "
      "profiles=\"urn:mpeg:dash:profile:isoff-on-demand:2011\">\n"
      "<BaseURL>",
      target,
      "/</BaseURL>\n<Period><AdaptationSet mimeType=\"video/mp2t\">"
      "<Representation id=\"1\" bandwidth=\"100000\"><BaseURL>segment.ts</BaseURL>"
      "</Representation></AdaptationSet></Period></MPD>\n");
}

std::string HlsPlaylist(const std::string& target) {
  return absl::StrCat(
      "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:0\n"
      "#EXTINF:1.0,\n",
      target, "/segment.ts\n#EXT-X-ENDLIST\n");
}

std::string ConcatScript(const std::string& target) {
  return absl::StrCat("ffconcat version 1.0\nfile '", target, "/segment.ts'\n");
}

std::string SdpDescription(const std::string& /*target*/) {
  return "v=0\no=- 0 0 IN IP4 127.0.0.1\ns=feed\nc=IN IP4 127.0.0.1\nt=0 0\n"
         "m=video 5004 RTP/AVP 96\na=rtpmap:96 H264/90000\n";
}

std::string VobSubIndex(const std::string& /*target*/) {
  return "# VobSub index file, v7 (do not modify this line!)\nsize: 720x480\n"
         "id: en, index: 0\ntimestamp: 00:00:00:000, filepos: 000000000\n";
}

const std::vector<ReferencingInput>& ReferencingInputs() {
  static const auto& kInputs = *new std::vector<ReferencingInput>{
      {"dash", "manifest.mpd", DashManifest, true},    {"hls", "playlist.m3u8", HlsPlaylist, false},
      {"concat", "list.ffconcat", ConcatScript, true}, {"sdp", "feed.sdp", SdpDescription, true},
      {"vobsub", "subtitles.idx", VobSubIndex, true},
  };
  return kInputs;
}

class ReferencingInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeScratchDir("referencing");
    for (const char* served : {"/target", "/allowed"}) {
      std::filesystem::create_directories(dir_ + served);
    }
    ASSERT_NO_FATAL_FAILURE(testing::MakeVideo(
        "-f lavfi -i testsrc2=size=160x90:rate=25 -frames:v 25 -c:v libx264 -pix_fmt yuv420p "
        "-f mpegts",
        dir_ + "/target/segment.ts"));
    target_ = Serve(dir_ + "/target", "target.log");
    allowed_ = Serve(dir_ + "/allowed", "allowed.log");
    ASSERT_NE(target_, nullptr);
    ASSERT_NE(allowed_, nullptr);
  }
  void TearDown() override {
    target_.reset();
    allowed_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::unique_ptr<PythonServer> Serve(const std::string& directory, const std::string& log) {
    return PythonServer::Start(
        [&](int port) -> std::vector<std::string> {
          return {"-m",          "http.server", "--bind", "127.0.0.1", std::to_string(port),
                  "--directory", directory};
        },
        dir_ + "/" + log);
  }

  static ClipOptions SmallFrames() {
    ClipOptions options;
    options.sampling.num_frames = 4;
    options.preprocess.resize_shorter_side = 40;
    options.preprocess.crop_size = 32;
    options.decode_timeout_ms = 10000;
    return options;
  }

  std::string dir_;
  std::unique_ptr<PythonServer> target_;   // serves the segment every input refers to
  std::unique_ptr<PythonServer> allowed_;  // serves the inputs themselves, for the URI cases
};

TEST_F(ReferencingInputTest, UploadedBytesAreRefusedNamingTheFormatAndOpenNothing) {
  for (const ReferencingInput& input : ReferencingInputs()) {
    SCOPED_TRACE(input.format);
    const std::string bytes = input.make(target_->http());
    for (const bool chunked : {false, true}) {
      absl::StatusOr<DecodedClip> clip = chunked
                                             ? testing::DecodeInChunks(bytes, 64, SmallFrames())
                                             : DecodeClip(VideoSource::Bytes(bytes), SmallFrames());
      ASSERT_FALSE(clip.ok());
      EXPECT_EQ(clip.status().code(), absl::StatusCode::kInvalidArgument) << clip.status();
      EXPECT_THAT(clip.status().message(),
                  HasSubstr(absl::StrCat("FFmpeg format '", input.format, "'")));
      EXPECT_THAT(clip.status().message(), HasSubstr("uploaded bytes may not open anything"));
    }
  }
  EXPECT_THAT(target_->log(), Not(HasSubstr("GET")));
}

TEST_F(ReferencingInputTest, FromAnAllowedUriNothingOutsideTheAllowlistIsOpened) {
  const UriAllowlist allowlist = *UriAllowlist::Parse({allowed_->http() + "/"});
  for (const ReferencingInput& input : ReferencingInputs()) {
    SCOPED_TRACE(input.format);
    testing::WriteFile(dir_ + "/allowed/" + input.file_name, input.make(target_->http()));
    absl::StatusOr<DecodedClip> clip =
        DecodeUri(allowed_->http() + "/" + input.file_name, allowlist, SmallFrames());
    ASSERT_FALSE(clip.ok());
    if (input.refused_for_uri) {
      EXPECT_EQ(clip.status().code(), absl::StatusCode::kInvalidArgument) << clip.status();
      EXPECT_THAT(clip.status().message(),
                  HasSubstr(absl::StrCat("(FFmpeg format '", input.format, "')")));
    } else {
      EXPECT_EQ(clip.status().code(), absl::StatusCode::kPermissionDenied) << clip.status();
      EXPECT_THAT(clip.status().message(), HasSubstr("not in this server's URI allowlist"));
    }
  }
  EXPECT_THAT(target_->log(), Not(HasSubstr("GET")));
}

TEST_F(ReferencingInputTest, AFileReferenceInAnUploadIsNotRead) {
  // A local file outside any allowlist, named by absolute path and by file: URI.
  const std::string segment = dir_ + "/target/segment.ts";
  for (const std::string& reference : {segment, "file://" + segment}) {
    SCOPED_TRACE(reference);
    const std::string playlist = absl::StrCat("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:1.0,\n",
                                              reference, "\n#EXT-X-ENDLIST\n");
    absl::StatusOr<DecodedClip> clip = DecodeClip(VideoSource::Bytes(playlist), SmallFrames());
    ASSERT_FALSE(clip.ok());
    EXPECT_EQ(clip.status().code(), absl::StatusCode::kInvalidArgument) << clip.status();
    EXPECT_THAT(clip.status().message(), HasSubstr("FFmpeg format 'hls'"));
  }
}

}  // namespace
}  // namespace vidclf::media
