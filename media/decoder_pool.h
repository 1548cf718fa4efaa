// Decoders kept open between clips, so that a clip decoded on a GPU pays neither for setting an
// NVDEC decoder up nor for taking it down: together 0.2-0.3 s a clip on an H200, more than
// decoding a 720p clip takes (docs/gpu-serving-benchmark.md). A decoder is given back after its
// clip and taken again by a later stream of the same codec, picture size, pixel format and
// packet form (length-prefixed as in MP4, or start codes as in MPEG-TS) on the same device; it
// reads the new stream's parameter sets with its first packet and is never flushed
// (decoder_feed.h).
#ifndef VIDCLF_MEDIA_DECODER_POOL_H_
#define VIDCLF_MEDIA_DECODER_POOL_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>

#include "absl/status/statusor.h"
#include "media/nvdec_device.h"
#include "media/video_stream.h"

namespace vidclf::media {

// Thread-safe. Must not outlive the NvdecDevice its decoders were opened on.
class DecoderPool {
 public:
  // Keeps at most `max_idle` decoders (at least 1); past that, frees the one idle longest. On a
  // GPU each idle decoder holds one of the device's NVDEC sessions.
  explicit DecoderPool(int max_idle);
  ~DecoderPool();
  DecoderPool(const DecoderPool&) = delete;
  DecoderPool& operator=(const DecoderPool&) = delete;

  // An idle decoder for `stream`, else a new one (OpenVideoDecoder with one thread: NVDEC does not
  // decode faster with more, and runs end by filler only without frame threads).
  absl::StatusOr<VideoDecoder> Take(const AVStream& stream, const AVCodec* codec,
                                    int max_frame_side, const NvdecDevice* nvdec);

  // Keeps `decoder`, taken from this pool, for a later Take. Its last run must have ended
  // (DecoderFeed::EndRun) without an error.
  void Give(VideoDecoder decoder);

  int idle() const;
  // Takes answered with an idle decoder.
  int64_t reuses() const;

 private:
  struct Key {
    int codec_id;
    int width;
    int height;
    int pixel_format;
    bool length_prefixed;  // NAL units with length prefixes, not start codes
    const NvdecDevice* device;
    bool operator==(const Key& other) const;
  };
  struct Idle {
    Key key;
    std::unique_ptr<VideoDecoder> decoder;
  };
  static Key KeyOf(const VideoDecoder& decoder);

  const int max_idle_;
  mutable std::mutex mutex_;
  std::deque<Idle> idle_;  // the longest idle first
  int64_t reuses_ = 0;
};

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_DECODER_POOL_H_
