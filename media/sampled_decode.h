// The decoding pass of a clip decode: the wanted frames, decoded (seeking to keyframes and
// skipping what no wanted frame needs, where the options allow) and converted. Internal to the
// clip decoder.
#ifndef VIDCLF_MEDIA_SAMPLED_DECODE_H_
#define VIDCLF_MEDIA_SAMPLED_DECODE_H_

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "media/clip_limits.h"
#include "media/clip_options.h"
#include "media/frame_table.h"
#include "media/packet_reader.h"

namespace vidclf::media {

using PacketReaderFactory = std::function<absl::StatusOr<std::unique_ptr<PacketReader>>()>;

// Decodes the wanted frames from the packets of a fresh reader. If identifying frames by
// timestamp missed any (a decoder that rewrites timestamps), decodes again by counting.
absl::StatusOr<DecodedClip> DecodeListed(const ListedVideo& listed, const AVFormatContext& format,
                                         const PacketReaderFactory& open_reader,
                                         DecodeClock::time_point start,
                                         DecodeClock::time_point deadline,
                                         const ClipOptions& options);

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_SAMPLED_DECODE_H_
