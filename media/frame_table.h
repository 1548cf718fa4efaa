// The listing pass of a clip decode: every frame of the video stream, read without decoding,
// and the frames the sampling wants of them. Internal to the clip decoder.
#ifndef VIDCLF_MEDIA_FRAME_TABLE_H_
#define VIDCLF_MEDIA_FRAME_TABLE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "media/av_util.h"
#include "media/clip_limits.h"
#include "media/clip_options.h"
#include "media/video_stream.h"

namespace vidclf::media {

// Every frame of the video stream, from a demux-only pass (cheap: nothing is decoded).
struct FrameTable {
  int64_t count = 0;
  // Presentation timestamps in presentation order, in the stream's time base. Empty unless every
  // packet has a distinct one; then frames are identified by timestamp, which is what lets the
  // decoder seek and skip.
  std::vector<int64_t> pts;
  // Presentation indices of the keyframes (only with `pts`).
  std::vector<int64_t> keyframes;
  // What ended the listing: AVERROR_EOF at the end of input, another libav error for a damaged
  // or broken-off input, 0 when the sampling was settled first.
  int read_error = 0;
};

// The video stream's packets, kept by a single-pass source (a stream, a URI) that cannot be read
// twice.
using PacketList = std::vector<PacketPtr>;

// Presentation time in seconds of every frame, from the start of the stream.
std::vector<double> FrameTimes(const FrameTable& table, const AVStream& stream);

// What the listing pass learnt, and the frames the sampling wants.
struct ListedVideo {
  VideoStream stream;
  FrameTable table;
  std::vector<double> times;
  std::vector<int64_t> wanted;
};

// Finds the video stream, lists its frames and samples them; errors for no frames, too long a
// video, or a sampling that matches none.
absl::StatusOr<ListedVideo> ListVideo(AVFormatContext* format, DecodeClock::time_point deadline,
                                      const ClipOptions& options, PacketList* keep);

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_FRAME_TABLE_H_
