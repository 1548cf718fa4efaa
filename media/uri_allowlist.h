// Which URIs the server may pull video from.
#ifndef VIDCLF_MEDIA_URI_ALLOWLIST_H_
#define VIDCLF_MEDIA_URI_ALLOWLIST_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace vidclf::media {

// A list of URI prefixes, each "scheme://host[:port][/path]" (http, https, rtsp, rtmp, ...) or
// "file:///directory/". A URI is allowed when one entry has its scheme, host and port (compared
// exactly, the host without case) and its path starts with the entry's path at a "/" boundary.
// Paths with ".." segments or percent-encoded dots and slashes are refused, and a file's real
// path (symbolic links resolved) must stay under the entry. The empty list allows nothing.
class UriAllowlist {
 public:
  UriAllowlist() = default;
  // INVALID_ARGUMENT naming the entry that is not of the forms above.
  static absl::StatusOr<UriAllowlist> Parse(const std::vector<std::string>& entries);

  // OK when `uri` is allowed; PERMISSION_DENIED saying why not; INVALID_ARGUMENT when `uri` has
  // no scheme.
  absl::Status Check(absl::string_view uri) const;

  // The value for FFmpeg's protocol_whitelist: the entries' schemes and the protocols beneath
  // them (https runs over tls and tcp), so that nothing nested in an allowed source, such as an
  // HLS playlist naming a file: segment, can open another protocol.
  std::string ProtocolWhitelist() const;

  bool empty() const { return entries_.empty(); }

 private:
  struct Entry {
    std::string scheme;  // lower case
    std::string host;    // lower case; empty for file
    int port = -1;       // -1: none given
    std::string path;
  };
  std::vector<Entry> entries_;
};

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_URI_ALLOWLIST_H_
