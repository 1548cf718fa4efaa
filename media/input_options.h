// The few FFmpeg input options a pulled source may set (how an RTSP camera is reached, say),
// checked against a table: anything else could undo the allowlist's protocol whitelist or the
// input checks, so names and values outside the table are refused.
#ifndef VIDCLF_MEDIA_INPUT_OPTIONS_H_
#define VIDCLF_MEDIA_INPUT_OPTIONS_H_

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace vidclf::media {

// Option name to value, as FFmpeg's AVDictionary takes them.
using InputOptions = std::map<std::string, std::string>;

// OK when every option is one a source at `uri` may set:
//   rtsp_transport  udp, tcp, udp_multicast, http or https, several joined by '+' (rtsp:// and
//                   rtsps:// only): cameras behind NAT or a firewall need tcp
//   rtsp_flags      prefer_tcp (rtsp:// and rtsps:// only)
// INVALID_ARGUMENT naming the option and what is allowed otherwise.
absl::Status ValidateInputOptions(const InputOptions& options, absl::string_view uri);

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_INPUT_OPTIONS_H_
