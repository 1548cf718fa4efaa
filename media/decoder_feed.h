// Packets into a decoder, in runs: from a keyframe on, up to a seek or the end of a clip, where
// the decoder hands out every frame it still holds back (for reordering) before the next run.
//
// A decoder ends a run by a flush, except one kept set up between clips (VideoDecoder::keep_set_up,
// DecoderPool): libavcodec 5.1's H.264 decoder sets its hardware decoder up anew after a flush,
// which on NVDEC costs 0.2-0.3 s (docs/gpu-serving-benchmark.md, machine 3). Such a decoder ends
// a run by decoding the run's IDR picture again, as filler, until the held frames have come out:
// an IDR picture is decoded without the pictures before it and is shown after all of them, and
// the fillers, stamped with kFillerPts, are dropped as they come out, in this run or the next.
#ifndef VIDCLF_MEDIA_DECODER_FEED_H_
#define VIDCLF_MEDIA_DECODER_FEED_H_

#include <cstdint>
#include <functional>
#include <limits>

#include "absl/status/status.h"
#include "media/av_util.h"
#include "media/video_stream.h"

namespace vidclf::media {

// The presentation timestamp of filler frames: no stream's.
inline constexpr int64_t kFillerPts = std::numeric_limits<int64_t>::min() + 1;

class DecoderFeed {
 public:
  // Feeds `decoder`, which decodes `stream` (a decoder that decoded another stream before first
  // reads this one's parameter sets). Both must outlive the feed.
  DecoderFeed(VideoDecoder& decoder, const AVStream& stream);

  // avcodec_send_packet's result for `packet`, whose data the feed may keep a reference to.
  int Send(AVPacket* packet);

  // What becomes of the frames the decoder holds when a run ends.
  enum class HeldFrames {
    kWanted,   // handed out
    kDropped,  // none is wanted: a flush drops them (fillers hand them out all the same)
  };

  // Ends the run: the decoder's held frames are handed out (and taken by `drain`, which must take
  // every frame ready) or dropped, and the decoder then takes packets from a keyframe on. Errors:
  // drain's, and INVALID_ARGUMENT when the decoder fails.
  absl::Status EndRun(HeldFrames held, const std::function<absl::Status()>& drain);

  // Whether ending a run sets the decoder's GPU decoder up anew: a flushed H.264 decoder on NVDEC,
  // one not kept set up. A seek then costs that set-up.
  bool RunEndSetsUpAnew() const;

  // Whether `frame` is filler, to be dropped.
  static bool IsFiller(const AVFrame& frame) { return frame.pts == kFillerPts; }

 private:
  // Whether the packet holds an IDR slice (H.264 in the lengths-prefixed form of MP4 and
  // Matroska, or with start codes).
  bool HoldsIdrSlice(const AVPacket& packet) const;

  VideoDecoder& decoder_;
  const AVStream& stream_;
  // Ends runs with fillers rather than a flush.
  const bool fill_ = false;
  // Bytes of each NAL unit's length prefix; 0: start codes.
  int nal_length_bytes_ = 0;
  bool parameter_sets_sent_ = false;
  // The run's latest IDR picture, when fillers end it; null after a run without one.
  PacketPtr idr_;
  bool sent_since_run_ended_ = false;
};

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_DECODER_FEED_H_
