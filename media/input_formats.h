// Which FFmpeg demuxers may read an input, by where the input comes from.
//
// Some formats are lists of other resources that their demuxers open: HLS and DASH playlists,
// concat scripts, IMF compositions, VobSub indexes (their .sub file), SDP descriptions (RTP
// sockets), Magic Lantern Video (chunk files beside it), image-sequence patterns. Uploaded bytes
// may open nothing, so all of these are refused for them. A URI's nested opens must each pass the
// URI allowlist through the demuxer's io_open hook; the formats whose demuxers open resources
// past that hook (DASH through ffio_open_whitelist, concat, IMF and VobSub through nested
// contexts that do not inherit it, SDP through RTP sockets) are refused for URIs too.
//
// The list was drawn from FFmpeg 5.1's libavformat: every demuxer that calls io_open,
// avio_open2, ffio_open_whitelist, ffurl_open_whitelist or avformat_open_input. MOV data
// references are the one case not refused by format: FFmpeg follows them only with the mov
// demuxer's enable_drefs option, which stays off, and then only through io_open.
#ifndef VIDCLF_MEDIA_INPUT_FORMATS_H_
#define VIDCLF_MEDIA_INPUT_FORMATS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

extern "C" {
#include <libavformat/avformat.h>
}

namespace vidclf::media {

enum class InputOrigin {
  kUpload,  // bytes from the caller: a request's payload, an upload, a live feed
  kUri,     // a source the server pulls, checked against the URI allowlist
};

// OK when `format` may read an input from `origin`; INVALID_ARGUMENT naming the format and why
// not otherwise. `input` names the input in the message ("the upload", "'https://...'").
absl::Status CheckInputFormat(const AVInputFormat& format, InputOrigin origin,
                              absl::string_view input);

// The value for FFmpeg's format_whitelist: every demuxer but those refused for `origin`. Nested
// contexts copy it (ff_copy_whiteblacklists), so no demuxer that a container opens inside itself
// can be a refused one either.
const std::string& FormatWhitelist(InputOrigin origin);

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_INPUT_FORMATS_H_
