#include "media/clip_decoder.h"

#include <algorithm>
#include <cerrno>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "media/clip_limits.h"
#include "media/demuxer.h"
#include "media/fragment_guard.h"
#include "media/frame_table.h"
#include "media/libav_settings.h"
#include "media/packet_reader.h"
#include "media/sampled_decode.h"
#include "media/video_stream.h"

extern "C" {
#include <libavformat/avformat.h>
#include <libavutil/log.h>
}

namespace vidclf::media {
namespace {

using Clock = DecodeClock;

// Whether libav's error code says that a connection broke, rather than that the data is bad.
bool IsConnectionError(int error_code) {
  for (const int code : {EIO, ECONNRESET, ECONNREFUSED, ECONNABORTED, ETIMEDOUT, EPIPE, ENETUNREACH,
                         EHOSTUNREACH, ENOTCONN}) {
    if (error_code == AVERROR(code)) return true;
  }
  return false;
}

// Lists and decodes a source that can be read only once (a stream, a URI), keeping its video
// packets in memory for the decode.
absl::StatusOr<DecodedClip> DecodeSinglePass(const Demuxer& demuxer, Clock::time_point start,
                                             Clock::time_point deadline,
                                             const ClipOptions& options) {
  PacketList packets;
  auto listed = ListVideo(demuxer.format(), deadline, options, &packets);
  if (auto status = demuxer.ReadError(); !status.ok()) return status;
  if (!listed.ok()) return listed.status();
  if (IsConnectionError(listed->table.read_error)) {
    return AvError(absl::StatusCode::kUnavailable,
                   absl::StrCat("the source broke off after ", listed->table.count, " frames"),
                   listed->table.read_error);
  }
  return DecodeListed(
      *listed, *demuxer.format(),
      [&]() -> absl::StatusOr<std::unique_ptr<PacketReader>> {
        return std::make_unique<ListPacketReader>(packets);
      },
      start, deadline, options);
}

// Bytes in memory: a first pass finds the video stream and lists its frames, so that sampling
// knows the length; the second, over a fresh demuxer, decodes and may seek.
absl::StatusOr<DecodedClip> DecodeBytes(absl::string_view bytes, Clock::time_point start,
                                        Clock::time_point deadline, const ClipOptions& options) {
  if (static_cast<int64_t>(bytes.size()) > options.max_input_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("input is ", bytes.size(), " bytes; the limit is ", options.max_input_bytes));
  }
  if (auto status = CheckWholeInput(bytes, options.max_frame_side, MaxFragmentSamples(options));
      !status.ok()) {
    return status;
  }

  auto probe = Demuxer::OpenMemory(bytes);
  if (!probe.ok()) return probe.status();
  auto listed = ListVideo((*probe)->format(), deadline, options, /*keep=*/nullptr);
  if (!listed.ok()) return listed.status();
  const int stream_index = listed->stream.index;
  return DecodeListed(
      *listed, *(*probe)->format(),
      [&]() -> absl::StatusOr<std::unique_ptr<PacketReader>> {
        auto demuxer = Demuxer::OpenMemory(bytes);
        if (!demuxer.ok()) return demuxer.status();
        // Formats without a header (MPEG program streams) add their streams as packets come,
        // in the same order as on the first opening.
        const AVFormatContext& format = *(*demuxer)->format();
        if (!(format.ctx_flags & AVFMTCTX_NOHEADER) &&
            stream_index >= static_cast<int>(format.nb_streams)) {
          return absl::InvalidArgumentError(
              "the video stream vanished when the input was reopened");
        }
        return std::make_unique<DemuxerPacketReader>(*std::move(demuxer), stream_index);
      },
      start, deadline, options);
}

// Bytes arriving in `input`: demuxed as they come when the container allows, else buffered whole.
absl::StatusOr<DecodedClip> DecodeStream(ByteStream& input, Clock::time_point start,
                                         Clock::time_point deadline, const ClipOptions& options) {
  auto streamable = DemuxesAsItArrives(input, deadline);
  if (!streamable.ok()) return streamable.status();
  if (!*streamable) {
    const absl::string_view bytes = input.WaitForEnd(deadline);
    if (auto status = input.read_error(); !status.ok()) return status;
    av_log(nullptr, AV_LOG_DEBUG,
           "vidclf: the container cannot be demuxed before its end (an MP4 whose moov box "
           "follows its media data, or a format not known to stream): buffered all %zu bytes\n",
           bytes.size());
    auto clip = DecodeBytes(bytes, Clock::now(), deadline, options);
    if (clip.ok()) clip->buffered_whole_input = true;
    return clip;
  }
  const std::string head = input.Peek(0, kRawHeaderBytes, deadline);
  if (auto status = input.read_error(); !status.ok()) return status;
  if (auto status = CheckRawHeaderFrameSize(head, options.max_frame_side); !status.ok()) {
    return status;
  }
  input.DropReadBytes();
  auto demuxer = Demuxer::OpenStream(input, deadline, MaxFragmentSamples(options));
  if (!demuxer.ok()) return demuxer.status();
  return DecodeSinglePass(**demuxer, start, deadline, options);
}

absl::StatusOr<DecodedClip> DecodeUri(const std::string& uri, Clock::time_point start,
                                      Clock::time_point deadline, const ClipOptions& options) {
  static const UriAllowlist* const kNothingAllowed = new UriAllowlist();
  const UriAllowlist& allowlist =
      options.uri_allowlist != nullptr ? *options.uri_allowlist : *kNothingAllowed;
  auto demuxer = Demuxer::OpenUri(
      uri, allowlist, deadline, RawInputChecks(options.max_frame_side, MaxFragmentSamples(options)),
      options.cancellation);
  if (!demuxer.ok()) return demuxer.status();
  return DecodeSinglePass(**demuxer, start, deadline, options);
}

}  // namespace

absl::StatusOr<DecodedClip> DecodeClip(const VideoSource& source, const ClipOptions& options) {
  std::optional<ReaderCloser> close_reader;
  if (source.stream() != nullptr) close_reader.emplace(*source.stream());
  if (auto status = CheckClipOptions(options); !status.ok()) return status;
  EnsureLibavConfigured();
  const auto start = Clock::now();
  const Clock::time_point deadline = DeadlineFrom(start, options);
  if (source.stream() != nullptr) return DecodeStream(*source.stream(), start, deadline, options);
  if (!source.uri().empty()) return DecodeUri(source.uri(), start, deadline, options);
  return DecodeBytes(source.bytes(), start, deadline, options);
}

}  // namespace vidclf::media
