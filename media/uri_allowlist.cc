#include "media/uri_allowlist.h"

#include <filesystem>
#include <map>
#include <set>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "media/uri_redaction.h"

extern "C" {
#include <libavformat/avformat.h>
}

namespace vidclf::media {
namespace {

struct SplitUri {
  std::string scheme;
  std::string host;
  int port = -1;
  std::string path;
};

// Splits `uri` the way FFmpeg will open it: av_url_split for network URIs; for file:, FFmpeg's
// file protocol opens whatever follows "file:", where "//" means "/".
absl::StatusOr<SplitUri> Split(absl::string_view uri) {
  const size_t colon = uri.find(':');
  const absl::string_view scheme = uri.substr(0, colon);
  if (colon == absl::string_view::npos || scheme.empty() ||
      scheme.find_first_not_of(
          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-") !=
          absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", RedactUri(uri), "' is not a URI: it needs a scheme, such as https:// or file://"));
  }
  SplitUri split;
  split.scheme = absl::AsciiStrToLower(scheme);
  if (split.scheme == "file") {
    for (const char c : uri.substr(colon + 1)) {
      if (c != '/' || split.path.empty() || split.path.back() != '/') split.path.push_back(c);
    }
    return split;
  }
  const std::string text(uri);
  char protocol[64], authorization[256], host[256], path[4096];
  av_url_split(protocol, sizeof(protocol), authorization, sizeof(authorization), host, sizeof(host),
               &split.port, path, sizeof(path), text.c_str());
  split.host = absl::AsciiStrToLower(host);
  split.path = path;
  if (split.host.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("'", RedactUri(uri), "' names no host"));
  }
  return split;
}

// Why `path` must not be compared by its prefix, or empty when it may.
std::string UnsafePathReason(const std::string& path) {
  const std::string lower = absl::AsciiStrToLower(path.substr(0, path.find_first_of("?#")));
  for (const char* encoded : {"%2e", "%2f", "%5c"}) {
    if (absl::StrContains(lower, encoded)) return "it has a percent-encoded dot or slash";
  }
  if (absl::StrContains(lower, "\\")) return "it has a backslash";
  for (absl::string_view segment : absl::StrSplit(lower, '/')) {
    if (segment == ".." || segment == ".") return "it has a '.' or '..' segment";
  }
  return "";
}

bool PathUnder(absl::string_view path, absl::string_view prefix) {
  if (!absl::StartsWith(path, prefix)) return false;
  if (prefix.empty() || prefix.back() == '/' || path.size() == prefix.size()) return true;
  const char next = path[prefix.size()];
  return next == '/' || next == '?';
}

// The path with symbolic links resolved, as far as it exists: a missing file behind a link that
// leads outside must be refused too, or the answer would tell which files exist out there.
std::string RealPath(const std::string& path) {
  std::error_code error;
  const std::filesystem::path resolved = std::filesystem::weakly_canonical(path, error);
  return error ? path : resolved.string();
}

std::string Describe(const SplitUri& uri) {
  if (uri.scheme == "file") return absl::StrCat("file://", uri.path);
  return absl::StrCat(uri.scheme, "://", uri.host, uri.port >= 0 ? absl::StrCat(":", uri.port) : "",
                      uri.path);
}

}  // namespace

absl::StatusOr<UriAllowlist> UriAllowlist::Parse(const std::vector<std::string>& entries) {
  UriAllowlist allowlist;
  for (const std::string& text : entries) {
    auto split = Split(text);
    if (!split.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad URI allowlist entry: ", split.status().message()));
    }
    if (split->scheme == "file" && (split->path.empty() || split->path.front() != '/')) {
      return absl::InvalidArgumentError(absl::StrCat("bad URI allowlist entry '", text,
                                                     "': a file entry needs an absolute path"));
    }
    if (absl::StrContains(split->path, "?") || !UnsafePathReason(split->path).empty()) {
      return absl::InvalidArgumentError(absl::StrCat("bad URI allowlist entry '", text,
                                                     "': its path must be plain, without a query"));
    }
    allowlist.entries_.push_back({split->scheme, split->host, split->port, split->path});
  }
  return allowlist;
}

absl::Status UriAllowlist::Check(absl::string_view raw_uri) const {
  auto split = Split(raw_uri);
  const std::string uri = RedactUri(raw_uri);
  if (!split.ok()) return split.status();
  if (entries_.empty()) {
    return absl::PermissionDeniedError(
        absl::StrCat("this server pulls video from no URI (its URI allowlist is empty); send the "
                     "video's bytes instead of '",
                     uri, "'"));
  }
  if (const std::string reason = UnsafePathReason(split->path); !reason.empty()) {
    return absl::PermissionDeniedError(absl::StrCat("URI '", uri, "' is refused: ", reason));
  }
  for (const Entry& entry : entries_) {
    if (entry.scheme != split->scheme || entry.host != split->host || entry.port != split->port ||
        !PathUnder(split->path, entry.path)) {
      continue;
    }
    if (entry.scheme == "file" && !PathUnder(RealPath(split->path), RealPath(entry.path))) {
      return absl::PermissionDeniedError(
          absl::StrCat("URI '", uri, "' is refused: a symbolic link leads outside ", entry.path));
    }
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(
      absl::StrCat("URI '", uri, "' is not in this server's URI allowlist (",
                   RedactUri(Describe(*split)), " is under no entry)"));
}

std::string UriAllowlist::ProtocolWhitelist() const {
  // The protocols each scheme opens beneath it, by FFmpeg's protocol names.
  static const auto& kCarriers = *new std::map<std::string, std::vector<std::string>>{
      {"http", {"tcp"}},
      {"https", {"tls", "tcp"}},
      {"rtsp", {"rtp", "udp", "tcp"}},
      {"rtsps", {"rtp", "udp", "tcp", "tls"}},
      {"rtmp", {"tcp"}},
      {"rtmps", {"tls", "tcp"}},
  };
  std::set<std::string> protocols;
  for (const Entry& entry : entries_) {
    protocols.insert(entry.scheme);
    if (auto carriers = kCarriers.find(entry.scheme); carriers != kCarriers.end()) {
      protocols.insert(carriers->second.begin(), carriers->second.end());
    }
  }
  return absl::StrJoin(protocols, ",");
}

}  // namespace vidclf::media
