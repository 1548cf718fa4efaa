// The URI allowlist and decoding from URIs, over real sources: files and HLS playlists made at test
// time by the ffmpeg CLI, served by python3's http.server and small python servers on loopback
// ports.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "media/clip_decoder.h"
#include "media/frame_sampler.h"
#include "media/uri_allowlist.h"
#include "tests/test_util/decode_sources.h"
#include "tests/test_util/python_server.h"
#include "tests/test_util/test_files.h"

namespace vidclf::media {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::UnorderedElementsAre;
using Clock = std::chrono::steady_clock;
using testing::AcceptsConnections;
using testing::BoundPort;
using testing::DecodeUri;
using testing::Loopback;
using testing::PythonServer;
using testing::UnusedLoopbackPort;
using testing::WriteFile;

// A listening socket that never accepts. The kernel completes each client's handshake and takes
// its request, so a client sees a server that never answers; and a connection attempt leaves a
// pending connection that connected() reports.
class SilentListener {
 public:
  SilentListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address = Loopback(0);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    EXPECT_EQ(::listen(fd_, 16), 0);
    port_ = BoundPort(fd_);
  }
  ~SilentListener() { ::close(fd_); }
  SilentListener(const SilentListener&) = delete;
  SilentListener& operator=(const SilentListener&) = delete;

  int port() const { return port_; }
  bool connected() const {
    pollfd poll_fd{fd_, POLLIN, 0};
    return ::poll(&poll_fd, 1, /*timeout=*/0) > 0;
  }
  // What clients sent on the connections pending so far (accepting them): empty when they sent
  // no request, even if they connected.
  std::string ReceivedBytes() {
    std::string received;
    while (connected()) {
      const int client = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK);
      if (client < 0) break;
      char buffer[4096];
      ssize_t n = 0;
      while ((n = ::recv(client, buffer, sizeof(buffer), 0)) > 0) received.append(buffer, n);
      ::close(client);
    }
    return received;
  }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// Answers every HTTP GET with "302 Found" to the location given on its command line.
constexpr char kRedirectServer[] = R"py(import http.server, sys
port, location = int(sys.argv[1]), sys.argv[2]
class Redirect(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()
http.server.ThreadingHTTPServer(("127.0.0.1", port), Redirect).serve_forever()
)py";

// Answers every RTSP request with "302 Moved Temporarily" to the location on its command line.
constexpr char kRtspRedirectServer[] = R"py(import re, socket, sys
port, location = int(sys.argv[1]), sys.argv[2]
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", port))
server.listen(8)
while True:
    connection, _ = server.accept()
    request = b""
    while True:
        chunk = connection.recv(4096)
        if not chunk:
            break
        request += chunk
        while b"\r\n\r\n" in request:
            head, request = request.split(b"\r\n\r\n", 1)
            cseq = re.search(rb"CSeq: *(\d+)", head, re.I)
            print(head.split(b"\r\n")[0].decode(), flush=True)
            connection.sendall(b"RTSP/1.0 302 Moved Temporarily\r\nCSeq: " +
                               (cseq.group(1) if cseq else b"0") +
                               b"\r\nLocation: " + location.encode() + b"\r\n\r\n")
    connection.close()
)py";

UriAllowlist Allow(const std::vector<std::string>& entries) {
  absl::StatusOr<UriAllowlist> allowlist = UriAllowlist::Parse(entries);
  EXPECT_TRUE(allowlist.ok()) << allowlist.status();
  return allowlist.ok() ? *std::move(allowlist) : UriAllowlist();
}

std::set<std::string> Protocols(const UriAllowlist& allowlist) {
  const std::vector<std::string> names = absl::StrSplit(allowlist.ProtocolWhitelist(), ',');
  return std::set<std::string>(names.begin(), names.end());
}

// Checks that `allowlist` refuses every one of `uris` with PERMISSION_DENIED.
void ExpectRefused(const UriAllowlist& allowlist, std::initializer_list<const char*> uris) {
  for (const char* uri : uris) {
    absl::Status status = allowlist.Check(uri);
    EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << uri << ": " << status;
  }
}

TEST(UriAllowlistTest, ParsesEachFormOfEntry) {
  absl::StatusOr<UriAllowlist> allowlist = UriAllowlist::Parse({
      "https://videos.example.com/public/",
      "http://127.0.0.1:8080",
      "rtsp://camera.example.com:554/stream1",
      "file:///srv/videos/",
      "file:/srv/more-videos",
  });
  ASSERT_TRUE(allowlist.ok()) << allowlist.status();
  EXPECT_FALSE(allowlist->empty());
  EXPECT_TRUE(allowlist->Check("https://videos.example.com/public/a.mp4").ok());
  EXPECT_TRUE(allowlist->Check("http://127.0.0.1:8080/anything/at/all.mkv").ok());
  EXPECT_TRUE(allowlist->Check("rtsp://camera.example.com:554/stream1").ok());
  EXPECT_TRUE(allowlist->Check("file:///srv/videos/a.mp4").ok());
  EXPECT_TRUE(allowlist->Check("file:///srv/more-videos/b.mp4").ok());
}

TEST(UriAllowlistTest, RefusesMalformedEntriesNamingThem) {
  for (const std::string entry : {
           "videos.example.com/public/",        // no scheme
           "/srv/videos/",                      // no scheme
           "://videos.example.com/",            // empty scheme
           "file:srv/videos/",                  // relative file path
           "file:",                             // no path
           "https://videos.example.com/v?x=1",  // a query
           "https://videos.example.com/a/../b",
           "https://videos.example.com/a/..",
           "https://videos.example.com/a/%2e%2e/b",
           "file:///srv/videos/../etc/",
       }) {
    SCOPED_TRACE(entry);
    absl::StatusOr<UriAllowlist> allowlist =
        UriAllowlist::Parse({"https://ok.example.com/", entry});
    ASSERT_FALSE(allowlist.ok());
    EXPECT_EQ(allowlist.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(allowlist.status().message(), HasSubstr(entry));
  }
}

TEST(UriAllowlistTest, EmptyListRefusesEverything) {
  const UriAllowlist defaulted;
  const UriAllowlist parsed = Allow({});
  for (const UriAllowlist* allowlist : {&defaulted, &parsed}) {
    EXPECT_TRUE(allowlist->empty());
    EXPECT_EQ(allowlist->ProtocolWhitelist(), "");
    for (const char* uri : {"https://videos.example.com/a.mp4", "file:///tmp/a.mp4",
                            "http://127.0.0.1/a.mp4", "rtsp://camera/stream"}) {
      EXPECT_EQ(allowlist->Check(uri).code(), absl::StatusCode::kPermissionDenied) << uri;
    }
  }
}

TEST(UriAllowlistTest, SchemeHostAndPortMustMatch) {
  const UriAllowlist allowlist = Allow({"http://videos.example.com:8080/clips/"});
  EXPECT_TRUE(allowlist.Check("http://videos.example.com:8080/clips/a.mp4").ok());
  ExpectRefused(allowlist, {
                               "https://videos.example.com:8080/clips/a.mp4",  // scheme
                               "rtsp://videos.example.com:8080/clips/a.mp4",
                               "http://other.example.com:8080/clips/a.mp4",  // host
                               "http://example.com:8080/clips/a.mp4",
                               "http://videos.example.com.evil.com:8080/clips/a.mp4",
                               "http://videos.example.com:8081/clips/a.mp4",  // port
                               "http://videos.example.com/clips/a.mp4",       // no port
                               "file:///clips/a.mp4",
                           });
}

TEST(UriAllowlistTest, ComparesHostAndSchemeWithoutCaseButPathWithCase) {
  const UriAllowlist allowlist = Allow({"https://Videos.Example.com/Clips/"});
  EXPECT_TRUE(allowlist.Check("https://videos.example.com/Clips/a.mp4").ok());
  EXPECT_TRUE(allowlist.Check("https://VIDEOS.EXAMPLE.COM/Clips/a.mp4").ok());
  EXPECT_TRUE(allowlist.Check("HTTPS://videos.example.com/Clips/a.mp4").ok());
  EXPECT_EQ(allowlist.Check("https://videos.example.com/clips/a.mp4").code(),
            absl::StatusCode::kPermissionDenied);
}

TEST(UriAllowlistTest, PathPrefixEndsAtASlash) {
  for (const char* entry : {"http://h/videos", "http://h/videos/"}) {
    SCOPED_TRACE(entry);
    const UriAllowlist allowlist = Allow({entry});
    EXPECT_TRUE(allowlist.Check("http://h/videos/x.mp4").ok());
    EXPECT_TRUE(allowlist.Check("http://h/videos/deeper/x.mp4?token=1").ok());
    for (const char* uri : {"http://h/videos-private/x.mp4", "http://h/videosx.mp4",
                            "http://h/video/x.mp4", "http://h/x.mp4", "http://h/"}) {
      EXPECT_EQ(allowlist.Check(uri).code(), absl::StatusCode::kPermissionDenied) << uri;
    }
  }
  // Without a trailing slash the entry's own path is allowed too.
  EXPECT_TRUE(Allow({"http://h/videos"}).Check("http://h/videos").ok());
  EXPECT_TRUE(Allow({"http://h/videos"}).Check("http://h/videos?x=1").ok());
}

TEST(UriAllowlistTest, UserInfoDoesNotDisguiseTheHost) {
  const UriAllowlist allowlist = Allow({"https://allowed.com/"});
  EXPECT_TRUE(allowlist.Check("https://user:secret@allowed.com/x.mp4").ok());
  ExpectRefused(allowlist, {
                               "https://allowed.com@evil.com/x",
                               "https://allowed.com:443@evil.com/x",
                               "https://allowed.com@evil.com@another.com/x",
                               "https://evil.com/allowed.com/x",
                               "https://evil.com?@allowed.com/x",
                               "https://evil.com#@allowed.com/x",
                               "https://allowed.com.evil.com/x",
                           });
}

TEST(UriAllowlistTest, RefusesDotSegmentsAndEncodedSeparators) {
  const UriAllowlist allowlist =
      Allow({"http://h/videos/", "file:///srv/videos/", "https://allowed.com/"});
  ExpectRefused(allowlist, {
                               "http://h/videos/../secret.mp4",
                               "http://h/videos/a/../../secret.mp4",
                               "http://h/videos/./x.mp4",
                               "http://h/videos/..",
                               "http://h/videos/..?x=1",
                               "http://h/videos/%2e%2e/secret.mp4",
                               "http://h/videos/%2E%2E/secret.mp4",
                               "http://h/videos/.%2e/secret.mp4",
                               "http://h/videos/..%2fsecret.mp4",
                               "http://h/videos/a%2Fb.mp4",
                               "http://h/videos/..%5csecret.mp4",
                               "http://h/videos/..\\secret.mp4",
                               "file:///srv/videos/../../etc/passwd",
                               "file:///srv/videos/%2e%2e/x.mp4",
                               "https://allowed.com/..",
                           });
}

TEST(UriAllowlistTest, RefusesADotSegmentBeforeAFragment) {
  // The path of "http://h/videos/..#x" is "/videos/.." (RFC 3986): servers that cut the
  // fragment off the request line serve the directory above the allowed one.
  const UriAllowlist allowlist = Allow({"http://h/videos/"});
  ExpectRefused(allowlist, {"http://h/videos/..#x", "http://h/videos/..#/x.mp4"});
}

TEST(UriAllowlistTest, UriWithoutSchemeIsInvalid) {
  const UriAllowlist allowlist = Allow({"file:///srv/videos/", "http://h/"});
  for (const char* uri : {"/srv/videos/a.mp4", "srv/videos/a.mp4", "h/a.mp4", "", "://h/a.mp4"}) {
    absl::Status status = allowlist.Check(uri);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << uri << ": " << status;
  }
  // The empty list says the same: the URI is malformed whatever the list.
  EXPECT_EQ(UriAllowlist().Check("/srv/videos/a.mp4").code(), absl::StatusCode::kInvalidArgument);
}

TEST(UriAllowlistTest, ProtocolWhitelistNamesTheProtocolsBeneathEachScheme) {
  EXPECT_THAT(Protocols(Allow({"https://videos.example.com/"})),
              UnorderedElementsAre("https", "tls", "tcp"));
  EXPECT_THAT(Protocols(Allow({"http://127.0.0.1:8080/"})), UnorderedElementsAre("http", "tcp"));
  EXPECT_THAT(Protocols(Allow({"file:///srv/videos/"})), UnorderedElementsAre("file"));
  // Nothing but what the entries need: no file (an HLS playlist naming a file: segment), no
  // crypto, no data.
  EXPECT_THAT(Protocols(Allow({"https://a.example.com/", "http://b.example.com/"})),
              UnorderedElementsAre("https", "http", "tls", "tcp"));
}

class UriSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeScratchDir("uri");
    allowed_ = dir_ + "/videos";
    outside_ = dir_ + "/videos-private";
    www_ = dir_ + "/www";
    for (const std::string& dir : {allowed_, outside_, www_}) {
      std::filesystem::create_directories(dir);
    }
  }
  void TearDown() override {
    servers_.clear();
    std::filesystem::remove_all(dir_);
  }

  // A 2 s H.264 video with B-frames and a keyframe every 12 frames, its index first so that it
  // also streams over HTTP (python's http.server serves no byte ranges).
  static std::string ClipArguments() {
    return "-f lavfi -i testsrc2=size=160x90:rate=25 -frames:v 50 -c:v libx264 -bf 2 -g 12 "
           "-pix_fmt yuv420p -movflags +faststart";
  }

  static ClipOptions SmallFrames(int num_frames) {
    ClipOptions options;
    options.sampling.num_frames = num_frames;
    options.preprocess.resize_shorter_side = 40;
    options.preprocess.crop_size = 32;
    return options;
  }

  // python3 -m http.server serving `directory`; stopped in TearDown.
  PythonServer* ServeDirectory(const std::string& directory) {
    return Keep(PythonServer::Start(
        [&](int port) -> std::vector<std::string> {
          return {"-m",          "http.server", "--bind", "127.0.0.1", std::to_string(port),
                  "--directory", directory};
        },
        NewLogPath()));
  }

  // Runs the python `script` with its port and `argument`; stopped in TearDown.
  PythonServer* RunScript(const std::string& script, const std::string& argument) {
    const std::string path = absl::StrCat(dir_, "/script", servers_.size(), ".py");
    std::ofstream(path) << script;
    return Keep(PythonServer::Start(
        [&](int port) -> std::vector<std::string> {
          return {path, std::to_string(port), argument};
        },
        NewLogPath()));
  }

  // An HLS playlist of one second segments at `segment_uris`.
  static std::string Playlist(const std::vector<std::string>& segment_uris) {
    std::string playlist =
        "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:0\n";
    for (const std::string& uri : segment_uris)
      absl::StrAppend(&playlist, "#EXTINF:1.0,\n", uri, "\n");
    return playlist + "#EXT-X-ENDLIST\n";
  }

  static void ExpectSameClip(const DecodedClip& actual, const DecodedClip& expected) {
    EXPECT_EQ(actual.num_frames, expected.num_frames);
    EXPECT_EQ(actual.total_frames, expected.total_frames);
    EXPECT_EQ(actual.source_width, expected.source_width);
    EXPECT_EQ(actual.source_height, expected.source_height);
    EXPECT_EQ(actual.frame_indices, expected.frame_indices);
    ASSERT_EQ(actual.timestamps_seconds.size(), expected.timestamps_seconds.size());
    for (size_t i = 0; i < actual.timestamps_seconds.size(); ++i) {
      EXPECT_NEAR(actual.timestamps_seconds[i], expected.timestamps_seconds[i], 1e-6) << i;
    }
    ASSERT_EQ(actual.pixels.size(), expected.pixels.size());
    size_t differing = 0;
    for (size_t i = 0; i < actual.pixels.size(); ++i) {
      if (actual.pixels[i] != expected.pixels[i]) ++differing;
    }
    EXPECT_EQ(differing, 0u) << "of " << actual.pixels.size() << " floats";
  }

  std::string dir_;
  std::string allowed_;  // the directory that file: entries allow
  std::string outside_;  // its sibling "videos-private", which they do not
  std::string www_;      // what http.server serves

 private:
  PythonServer* Keep(std::unique_ptr<PythonServer> server) {
    servers_.push_back(std::move(server));
    return servers_.back().get();
  }
  std::string NewLogPath() { return absl::StrCat(dir_, "/server", servers_.size(), ".log"); }

  std::vector<std::unique_ptr<PythonServer>> servers_;
};

TEST_F(UriSourceTest, FileUriDecodesLikeTheSameBytesInMemory) {
  const std::string path = allowed_ + "/clip.mp4";
  // Index at the end, as ffmpeg writes by default: a file is seekable.
  ASSERT_NO_FATAL_FAILURE(testing::MakeVideo(
      "-f lavfi -i testsrc2=size=160x90:rate=25 -frames:v 50 -c:v libx264 -bf 2 -g 12 "
      "-pix_fmt yuv420p",
      path));
  const UriAllowlist allowlist = Allow({"file://" + allowed_ + "/"});
  const ClipOptions options = SmallFrames(/*num_frames=*/8);

  absl::StatusOr<DecodedClip> expected =
      DecodeClip(VideoSource::Bytes(testing::ReadFile(path)), options);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_EQ(expected->total_frames, 50);
  for (const std::string& uri : {"file://" + path, "file:" + path}) {
    SCOPED_TRACE(uri);
    absl::StatusOr<DecodedClip> clip = DecodeUri(uri, allowlist, options);
    ASSERT_TRUE(clip.ok()) << clip.status();
    ExpectSameClip(*clip, *expected);
  }
}

TEST_F(UriSourceTest, FileUriToAMissingFileIsNotFound) {
  const UriAllowlist allowlist = Allow({"file://" + allowed_ + "/"});
  absl::StatusOr<DecodedClip> clip =
      DecodeUri("file://" + allowed_ + "/missing.mp4", allowlist, SmallFrames(4));
  ASSERT_FALSE(clip.ok());
  EXPECT_EQ(clip.status().code(), absl::StatusCode::kNotFound) << clip.status();
}

TEST_F(UriSourceTest, FileUriOutsideTheDirectoryIsRefused) {
  ASSERT_NO_FATAL_FAILURE(testing::MakeVideo(ClipArguments(), outside_ + "/clip.mp4"));
  ASSERT_NO_FATAL_FAILURE(testing::MakeVideo(ClipArguments(), dir_ + "/clip.mp4"));
  const UriAllowlist allowlist = Allow({"file://" + allowed_});
  for (const std::string& uri : {
           "file://" + outside_ + "/clip.mp4",  // a sibling whose name starts like the entry's
           "file://" + dir_ + "/clip.mp4",
           "file://" + allowed_ + "/../clip.mp4",
           "file://" + allowed_ + "/../videos-private/clip.mp4",
       }) {
    absl::StatusOr<DecodedClip> clip = DecodeUri(uri, allowlist, SmallFrames(4));
    ASSERT_FALSE(clip.ok()) << uri;
    EXPECT_EQ(clip.status().code(), absl::StatusCode::kPermissionDenied) << clip.status();
  }
}

TEST_F(UriSourceTest, FileUriThroughASymlinkLeadingOutsideIsRefused) {
  ASSERT_NO_FATAL_FAILURE(testing::MakeVideo(ClipArguments(), outside_ + "/clip.mp4"));
  std::filesystem::create_symlink(outside_ + "/clip.mp4", allowed_ + "/link.mp4");
  std::filesystem::create_directory_symlink(outside_, allowed_ + "/linked-dir");
  // A symlink that stays inside is fine.
  std::filesystem::copy_file(outside_ + "/clip.mp4", allowed_ + "/clip.mp4");
  std::filesystem::create_symlink(allowed_ + "/clip.mp4", allowed_ + "/inner-link.mp4");
  const UriAllowlist allowlist = Allow({"file://" + allowed_ + "/"});

  for (const std::string& uri :
       {"file://" + allowed_ + "/link.mp4", "file://" + allowed_ + "/linked-dir/clip.mp4"}) {
    SCOPED_TRACE(uri);
    EXPECT_EQ(allowlist.Check(uri).code(), absl::StatusCode::kPermissionDenied);
    absl::StatusOr<DecodedClip> clip = DecodeUri(uri, allowlist, SmallFrames(4));
    ASSERT_FALSE(clip.ok());
    EXPECT_EQ(clip.status().code(), absl::StatusCode::kPermissionDenied) << clip.status();
    EXPECT_THAT(clip.status().message(), HasSubstr("symbolic link"));
  }
  absl::StatusOr<DecodedClip> inner =
      DecodeUri("file://" + allowed_ + "/inner-link.mp4", allowlist, SmallFrames(4));
  EXPECT_TRUE(inner.ok()) << inner.status();
}

TEST_F(UriSourceTest, FileUriToAMissingFileBehindAnOutwardSymlinkIsRefused) {
  // Otherwise NOT_FOUND against PERMISSION_DENIED would tell which files exist outside.
  ASSERT_NO_FATAL_FAILURE(testing::MakeVideo(ClipArguments(), outside_ + "/clip.mp4"));
  std::filesystem::create_directory_symlink(outside_, allowed_ + "/linked-dir");
  const UriAllowlist allowlist = Allow({"file://" + allowed_ + "/"});
  const std::string present = "file://" + allowed_ + "/linked-dir/clip.mp4";
  const std::string missing = "file://" + allowed_ + "/linked-dir/missing.mp4";
  EXPECT_EQ(allowlist.Check(present).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(allowlist.Check(missing).code(), absl::StatusCode::kPermissionDenied);
  absl::StatusOr<DecodedClip> clip = DecodeUri(missing, allowlist, SmallFrames(4));
  ASSERT_FALSE(clip.ok());
  EXPECT_EQ(clip.status().code(), absl::StatusCode::kPermissionDenied) << clip.status();
}

TEST_F(UriSourceTest, HttpDecodesLikeTheSameBytesInMemory) {
  ASSERT_NO_FATAL_FAILURE(testing::MakeVideo(ClipArguments(), www_ + "/clip.mp4"));
  PythonServer* server = ServeDirectory(www_);
  ASSERT_NE(server, nullptr);
  const UriAllowlist allowlist = Allow({server->http() + "/"});
  const ClipOptions options = SmallFrames(/*num_frames=*/8);

  absl::StatusOr<DecodedClip> expected =
      DecodeClip(VideoSource::Bytes(testing::ReadFile(www_ + "/clip.mp4")), options);
  ASSERT_TRUE(expected.ok()) << expected.status();
  absl::StatusOr<DecodedClip> clip = DecodeUri(server->http() + "/clip.mp4", allowlist, options);
  ASSERT_TRUE(clip.ok()) << clip.status();
  ExpectSameClip(*clip, *expected);
  EXPECT_THAT(server->log(), HasSubstr("\"GET /clip.mp4 HTTP/1.1\" 200"));
}

TEST_F(UriSourceTest, HttpNotFoundIsNotFound) {
  PythonServer* server = ServeDirectory(www_);
  ASSERT_NE(server, nullptr);
  absl::StatusOr<DecodedClip> clip =
      DecodeUri(server->http() + "/missing.mp4", Allow({server->http() + "/"}), SmallFrames(4));
  ASSERT_FALSE(clip.ok());
  EXPECT_EQ(clip.status().code(), absl::StatusCode::kNotFound) << clip.status();
  EXPECT_THAT(server->log(), HasSubstr("\"GET /missing.mp4 HTTP/1.1\" 404"));
}

TEST_F(UriSourceTest, HttpToAClosedPortIsUnavailable) {
  const std::string prefix = absl::StrCat("http://127.0.0.1:", UnusedLoopbackPort());
  ClipOptions options = SmallFrames(4);
  options.decode_timeout_ms = 5000;
  absl::StatusOr<DecodedClip> clip =
      DecodeUri(prefix + "/clip.mp4", Allow({prefix + "/"}), options);
  ASSERT_FALSE(clip.ok());
  EXPECT_EQ(clip.status().code(), absl::StatusCode::kUnavailable) << clip.status();
}

TEST_F(UriSourceTest, HttpOutsideTheAllowlistIsRefusedWithoutConnecting) {
  SilentListener listener;
  const std::string prefix = absl::StrCat("http://127.0.0.1:", listener.port());
  ClipOptions options = SmallFrames(4);
  options.decode_timeout_ms = 2000;  // were it to connect, the silent listener would hang it
  for (const std::string& allowed : {
           absl::StrCat("http://127.0.0.1:", UnusedLoopbackPort(), "/"),  // another port
           absl::StrCat("http://localhost:", listener.port(), "/"),       // another host name
           prefix + "/videos/",                                           // another path
           absl::StrCat("https://127.0.0.1:", listener.port(), "/"),      // another scheme
       }) {
    SCOPED_TRACE(allowed);
    absl::StatusOr<DecodedClip> clip = DecodeUri(prefix + "/clip.mp4", Allow({allowed}), options);
    ASSERT_FALSE(clip.ok());
    EXPECT_EQ(clip.status().code(), absl::StatusCode::kPermissionDenied) << clip.status();
    EXPECT_FALSE(listener.connected());
  }
}

TEST_F(UriSourceTest, HlsPlaylistDecodesLikeItsSource) {
  // One second segments cut at the keyframes of a 3 s video, copied: the same coded frames.
  const std::string source = dir_ + "/source.mp4";
  ASSERT_NO_FATAL_FAILURE(testing::MakeVideo(
      "-f lavfi -i testsrc2=size=160x90:rate=25 -frames:v 75 -c:v libx264 -bf 2 -g 25 "
      "-pix_fmt yuv420p",
      source));
  std::filesystem::create_directories(www_ + "/hls");
  ASSERT_NO_FATAL_FAILURE(testing::MakeVideo(
      "-i '" + source + "' -c copy -f hls -hls_time 1 -hls_list_size 0", www_ + "/hls/index.m3u8"));
  ASSERT_TRUE(std::filesystem::exists(www_ + "/hls/index2.ts"));
  PythonServer* server = ServeDirectory(www_);
  ASSERT_NE(server, nullptr);
  const ClipOptions options = SmallFrames(/*num_frames=*/8);

  absl::StatusOr<DecodedClip> expected =
      DecodeClip(VideoSource::Bytes(testing::ReadFile(source)), options);
  ASSERT_TRUE(expected.ok()) << expected.status();
  absl::StatusOr<DecodedClip> clip =
      DecodeUri(server->http() + "/hls/index.m3u8", Allow({server->http() + "/hls/"}), options);
  ASSERT_TRUE(clip.ok()) << clip.status();
  EXPECT_EQ(clip->total_frames, 75);
  ExpectSameClip(*clip, *expected);
  const std::string log = server->log();
  for (const char* segment : {"/hls/index0.ts", "/hls/index1.ts", "/hls/index2.ts"}) {
    EXPECT_THAT(log, HasSubstr(absl::StrCat("\"GET ", segment, " HTTP/1.1\" 200")));
  }
}

class UriHlsSegmentTest : public UriSourceTest {
 protected:
  void SetUp() override {
    UriSourceTest::SetUp();
    std::filesystem::create_directories(www_ + "/hls");
    ASSERT_NO_FATAL_FAILURE(testing::MakeVideo(
        "-f lavfi -i testsrc2=size=160x90:rate=25 -frames:v 25 -c:v libx264 -g 25 "
        "-pix_fmt yuv420p -f hls -hls_time 1 -hls_list_size 0",
        www_ + "/hls/index.m3u8"));
    // The same segment outside what the server serves.
    segment_file_ = outside_ + "/segment.ts";
    std::filesystem::copy_file(www_ + "/hls/index0.ts", segment_file_);
    server_ = ServeDirectory(www_);
    ASSERT_NE(server_, nullptr);
  }

  std::string segment_file_;
  PythonServer* server_ = nullptr;
};

TEST_F(UriHlsSegmentTest, HandWrittenPlaylistWithAnAllowedSegmentDecodes) {
  // The form the refusals below use, with a segment that is allowed.
  WriteFile(www_ + "/plain.m3u8", Playlist({server_->http() + "/hls/index0.ts"}));
  absl::StatusOr<DecodedClip> clip =
      DecodeUri(server_->http() + "/plain.m3u8", Allow({server_->http() + "/"}), SmallFrames(4));
  ASSERT_TRUE(clip.ok()) << clip.status();
  EXPECT_EQ(clip->total_frames, 25);
}

TEST_F(UriHlsSegmentTest, FileSegmentIsRefused) {
  WriteFile(www_ + "/evil.m3u8", Playlist({"file://" + segment_file_}));
  const std::string playlist = server_->http() + "/evil.m3u8";
  // Without a file: entry, and with one for another directory, so that the protocol whitelist
  // lets file: through and only the check of nested URIs stands in the way.
  for (const std::vector<std::string>& entries :
       {std::vector<std::string>{server_->http() + "/"},
        std::vector<std::string>{server_->http() + "/", "file://" + allowed_ + "/"}}) {
    SCOPED_TRACE(entries.back());
    absl::StatusOr<DecodedClip> clip = DecodeUri(playlist, Allow(entries), SmallFrames(4));
    ASSERT_FALSE(clip.ok());
    EXPECT_EQ(clip.status().code(), absl::StatusCode::kPermissionDenied) << clip.status();
    EXPECT_THAT(clip.status().message(), HasSubstr(segment_file_));
  }
}

TEST_F(UriHlsSegmentTest, SegmentOnAnotherPortIsRefusedWithoutConnecting) {
  PythonServer* other = ServeDirectory(www_);
  ASSERT_NE(other, nullptr);
  WriteFile(www_ + "/evil.m3u8", Playlist({other->http() + "/hls/index0.ts"}));
  absl::StatusOr<DecodedClip> clip =
      DecodeUri(server_->http() + "/evil.m3u8", Allow({server_->http() + "/"}), SmallFrames(4));
  ASSERT_FALSE(clip.ok());
  EXPECT_EQ(clip.status().code(), absl::StatusCode::kPermissionDenied) << clip.status();
  EXPECT_THAT(server_->log(), HasSubstr("\"GET /evil.m3u8 HTTP/1.1\" 200"));
  EXPECT_THAT(other->log(), Not(HasSubstr("GET")));
}

TEST_F(UriHlsSegmentTest, LaterSegmentOnAnotherPortFailsTheWholeDecode) {
  // Not a clip of the allowed segments alone: uniform sampling needs the whole playlist.
  PythonServer* other = ServeDirectory(www_);
  ASSERT_NE(other, nullptr);
  WriteFile(www_ + "/mixed.m3u8",
            Playlist({server_->http() + "/hls/index0.ts", other->http() + "/hls/index0.ts"}));
  absl::StatusOr<DecodedClip> clip =
      DecodeUri(server_->http() + "/mixed.m3u8", Allow({server_->http() + "/"}), SmallFrames(4));
  ASSERT_FALSE(clip.ok());
  EXPECT_EQ(clip.status().code(), absl::StatusCode::kPermissionDenied) << clip.status();
  EXPECT_THAT(server_->log(), HasSubstr("\"GET /hls/index0.ts HTTP/1.1\" 200"));
  EXPECT_THAT(other->log(), Not(HasSubstr("GET")));
}

TEST_F(UriSourceTest, HttpRedirectIsNotFollowed) {
  ASSERT_NO_FATAL_FAILURE(testing::MakeVideo(ClipArguments(), www_ + "/clip.mp4"));
  PythonServer* allowed_target = ServeDirectory(www_);
  PythonServer* other_target = ServeDirectory(www_);
  ASSERT_NE(allowed_target, nullptr);
  ASSERT_NE(other_target, nullptr);
  for (PythonServer* target : {allowed_target, other_target}) {
    PythonServer* redirect = RunScript(kRedirectServer, target->http() + "/clip.mp4");
    ASSERT_NE(redirect, nullptr);
    SCOPED_TRACE(target == allowed_target ? "to an allowed URI" : "to a URI not allowed");
    const UriAllowlist allowlist = Allow({redirect->http() + "/", allowed_target->http() + "/"});
    ClipOptions options = SmallFrames(4);
    options.decode_timeout_ms = 5000;
    absl::StatusOr<DecodedClip> clip =
        DecodeUri(redirect->http() + "/moved.mp4", allowlist, options);
    ASSERT_FALSE(clip.ok());
    EXPECT_EQ(clip.status().code(), absl::StatusCode::kUnavailable) << clip.status();
    EXPECT_THAT(clip.status().message(), HasSubstr("redirects are not followed"));
    EXPECT_THAT(redirect->log(), HasSubstr("\"GET /moved.mp4 HTTP/1.1\" 302"));
    EXPECT_THAT(target->log(), Not(HasSubstr("GET")));
  }
}

TEST_F(UriSourceTest, RtspRedirectIsNotFollowed) {
  // RTSP has redirects of its own ("302 Moved Temporarily" with a Location header), which the
  // http protocol's max_redirects does not govern.
  SilentListener elsewhere;
  PythonServer* rtsp = RunScript(kRtspRedirectServer,
                                 absl::StrCat("rtsp://127.0.0.1:", elsewhere.port(), "/stream"));
  ASSERT_NE(rtsp, nullptr);
  const std::string uri = absl::StrCat("rtsp://127.0.0.1:", rtsp->port(), "/stream");
  ClipOptions options = SmallFrames(4);
  options.decode_timeout_ms = 2000;
  absl::StatusOr<DecodedClip> clip = DecodeUri(uri, Allow({uri}), options);
  ASSERT_FALSE(clip.ok());
  EXPECT_THAT(rtsp->log(), HasSubstr("OPTIONS " + uri));
  EXPECT_THAT(clip.status().code(),
              AnyOf(absl::StatusCode::kUnavailable, absl::StatusCode::kPermissionDenied))
      << clip.status();
  // The strongest that FFmpeg's RTSP demuxer permits: it connects to a redirect's target
  // before anything can stop it, but no request may reach the target.
  EXPECT_EQ(elsewhere.ReceivedBytes(), "")
      << "a request followed the RTSP redirect to a port the allowlist does not name";
}

TEST_F(UriSourceTest, SilentServerRunsIntoTheDeadline) {
  SilentListener silent;
  const std::string prefix = absl::StrCat("http://127.0.0.1:", silent.port());
  ClipOptions options = SmallFrames(4);
  options.decode_timeout_ms = 1000;
  const auto start = Clock::now();
  absl::StatusOr<DecodedClip> clip =
      DecodeUri(prefix + "/clip.mp4", Allow({prefix + "/"}), options);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_FALSE(clip.ok());
  EXPECT_EQ(clip.status().code(), absl::StatusCode::kDeadlineExceeded) << clip.status();
  EXPECT_TRUE(silent.connected());
  EXPECT_GE(seconds, 0.9);
  EXPECT_LT(seconds, 3.0);
}

TEST_F(UriSourceTest, SamplingWithAFrameCountStopsReadingEarly) {
  // 10 s at 25 fps: 250 frames, of which "all, at most 5" needs the first 5.
  ASSERT_NO_FATAL_FAILURE(testing::MakeVideo(
      "-f lavfi -i testsrc2=size=64x48:rate=25 -frames:v 250 -c:v libx264 -bf 2 -g 25 "
      "-pix_fmt yuv420p -movflags +faststart",
      www_ + "/long.mp4"));
  std::filesystem::copy_file(www_ + "/long.mp4", allowed_ + "/long.mp4");
  PythonServer* server = ServeDirectory(www_);
  ASSERT_NE(server, nullptr);
  const UriAllowlist allowlist = Allow({"file://" + allowed_ + "/", server->http() + "/"});
  ClipOptions options = SmallFrames(/*num_frames=*/5);
  options.sampling.strategy = SamplingStrategy::kAll;

  for (const std::string& uri :
       {"file://" + allowed_ + "/long.mp4", server->http() + "/long.mp4"}) {
    SCOPED_TRACE(uri);
    absl::StatusOr<DecodedClip> clip = DecodeUri(uri, allowlist, options);
    ASSERT_TRUE(clip.ok()) << clip.status();
    EXPECT_EQ(clip->num_frames, 5);
    EXPECT_EQ(clip->frame_indices, (std::vector<int64_t>{0, 1, 2, 3, 4}));
    ASSERT_EQ(clip->timestamps_seconds.size(), 5u);
    for (int i = 0; i < 5; ++i) EXPECT_NEAR(clip->timestamps_seconds[i], i / 25.0, 1e-6);
    // Read until the sampling was settled (5 frames), plus a margin of 16 packets for
    // reordering.
    EXPECT_GE(clip->total_frames, 5);
    EXPECT_LE(clip->total_frames, 5 + 16);
  }
}

// The bytes of a URI pass the checks that bytes in memory pass before libavformat sees them: a
// y4m header declaring a huge picture, and MP4 fragments declaring more samples than the limit,
// get RESOURCE_EXHAUSTED over file: (seekable) and HTTP alike, while the same fragmented file
// with an honest count decodes as it does from memory.
TEST_F(UriSourceTest, UriBytesPassTheChecksThatBytesInMemoryPass) {
  ASSERT_NO_FATAL_FAILURE(testing::MakeVideo(
      "-f lavfi -i testsrc2=size=64x48:rate=10 -f lavfi -i sine=r=8000 -t 0.8 -c:v mpeg4 -g 3 "
      "-c:a aac -movflags frag_keyframe+empty_moov",
      www_ + "/fragmented.mp4"));
  const std::string fragmented = testing::ReadFile(www_ + "/fragmented.mp4");
  std::string overcounted = fragmented;
  const size_t trun = overcounted.find("trun");
  ASSERT_NE(trun, std::string::npos);
  // After the type: version (1 byte), flags (3 bytes: no per-sample fields), sample_count.
  const int64_t limit = 4 * ClipOptions().max_total_frames;
  const uint32_t declared = static_cast<uint32_t>(limit + 1);
  for (int i = 0; i < 3; ++i) overcounted[trun + 5 + i] = 0;
  for (int i = 0; i < 4; ++i)
    overcounted[trun + 8 + i] = static_cast<char>(declared >> (24 - 8 * i));
  WriteFile(www_ + "/overcounted.mp4", overcounted);
  WriteFile(www_ + "/huge.y4m",
            "YUV4MPEG2 W30000 H30000 F25:1 Ip A1:1 C420jpeg\nFRAME\n" + std::string(4096, '\x80'));
  for (const char* name : {"fragmented.mp4", "overcounted.mp4", "huge.y4m"}) {
    std::filesystem::copy_file(www_ + "/" + name, allowed_ + "/" + name);
  }
  PythonServer* server = ServeDirectory(www_);
  ASSERT_NE(server, nullptr);
  const UriAllowlist allowlist = Allow({"file://" + allowed_ + "/", server->http() + "/"});
  const ClipOptions options = SmallFrames(/*num_frames=*/4);

  absl::StatusOr<DecodedClip> expected = DecodeClip(VideoSource::Bytes(fragmented), options);
  ASSERT_TRUE(expected.ok()) << expected.status();
  for (const std::string& base : {"file://" + allowed_, server->http()}) {
    SCOPED_TRACE(base);
    absl::StatusOr<DecodedClip> clip = DecodeUri(base + "/fragmented.mp4", allowlist, options);
    ASSERT_TRUE(clip.ok()) << clip.status();
    ExpectSameClip(*clip, *expected);

    clip = DecodeUri(base + "/overcounted.mp4", allowlist, options);
    EXPECT_EQ(clip.status().code(), absl::StatusCode::kResourceExhausted) << clip.status();
    EXPECT_THAT(clip.status().message(), HasSubstr("fragments declare"));

    clip = DecodeUri(base + "/huge.y4m", allowlist, options);
    EXPECT_EQ(clip.status().code(), absl::StatusCode::kResourceExhausted) << clip.status();
    EXPECT_THAT(clip.status().message(), HasSubstr("30000x30000"));
  }
}

}  // namespace
}  // namespace vidclf::media
