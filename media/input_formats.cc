#include "media/input_formats.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace vidclf::media {
namespace {

// A demuxer that opens other resources, and for which inputs it is refused.
struct ReferencingFormat {
  const char* name;  // one of the demuxer's names (AVInputFormat::name is a comma list)
  const char* what;  // what such an input is, for the message
  bool refused_for_uri;
};

// Uploads refuse every entry; URIs those whose opens bypass the io_open hook.
constexpr ReferencingFormat kReferencingFormats[] = {
    {"hls", "an HLS playlist", false},
    {"mlv", "a Magic Lantern Video file, whose chunks are files beside it", false},
    {"image2", "an image-sequence pattern", false},
    {"dash", "a DASH manifest", true},
    {"concat", "a concat script", true},
    {"imf", "an IMF composition playlist", true},  // experimental: never probed, so far
    {"vobsub", "a VobSub index, whose subtitles are in a file beside it", true},
    {"sdp", "an SDP session description, which opens RTP sockets", true},
    {"sap", "a SAP announcement, which opens RTP sockets", true},
    {"rtp", "an RTP session", true},
    {"lavfi", "a filter graph, which may open files", true},
    // Reached through the allowlist's rtsp:// entries only; an upload cannot be one.
    {"rtsp", "an RTSP session", false},
};

const ReferencingFormat* FindReferencing(const char* demuxer_names) {
  for (absl::string_view name : absl::StrSplit(demuxer_names, ',')) {
    for (const ReferencingFormat& format : kReferencingFormats) {
      if (name == format.name) return &format;
    }
  }
  return nullptr;
}

bool Refused(const ReferencingFormat& format, InputOrigin origin) {
  return origin == InputOrigin::kUpload || format.refused_for_uri;
}

std::string MakeFormatWhitelist(InputOrigin origin) {
  std::vector<std::string> names;
  void* iterator = nullptr;
  while (const AVInputFormat* format = av_demuxer_iterate(&iterator)) {
    const ReferencingFormat* referencing = FindReferencing(format->name);
    if (referencing == nullptr || !Refused(*referencing, origin)) names.emplace_back(format->name);
  }
  return absl::StrJoin(names, ",");
}

}  // namespace

absl::Status CheckInputFormat(const AVInputFormat& format, InputOrigin origin,
                              absl::string_view input) {
  const ReferencingFormat* referencing = FindReferencing(format.name);
  if (referencing == nullptr || !Refused(*referencing, origin)) return absl::OkStatus();
  if (origin == InputOrigin::kUpload) {
    return absl::InvalidArgumentError(absl::StrCat(
        input, " is ", referencing->what, " (FFmpeg format '", referencing->name,
        "'), which refers to other resources; uploaded bytes may not open anything else: send "
        "the video itself, or its URI where this server's allowlist allows it"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      input, " is ", referencing->what, " (FFmpeg format '", referencing->name,
      "'); this server does not read that format from URIs, because FFmpeg opens what it refers "
      "to past the URI allowlist's check"));
}

const std::string& FormatWhitelist(InputOrigin origin) {
  static const auto& kUpload = *new std::string(MakeFormatWhitelist(InputOrigin::kUpload));
  static const auto& kUri = *new std::string(MakeFormatWhitelist(InputOrigin::kUri));
  return origin == InputOrigin::kUpload ? kUpload : kUri;
}

}  // namespace vidclf::media
