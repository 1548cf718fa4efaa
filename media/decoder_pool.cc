#include "media/decoder_pool.h"

#include <algorithm>
#include <utility>

namespace vidclf::media {

bool DecoderPool::Key::operator==(const Key& other) const {
  return codec_id == other.codec_id && width == other.width && height == other.height &&
         pixel_format == other.pixel_format && length_prefixed == other.length_prefixed &&
         device == other.device;
}

namespace {

// Whether parameter sets of this form say the stream's NAL units come with length prefixes (MP4's
// and Matroska's avcC and hvcC records begin with version 1), not start codes (Annex B, MPEG-TS).
// A decoder reads that form from its first parameter sets only: a stream without any could not
// tell a kept decoder that its form differs.
bool LengthPrefixed(const uint8_t* extradata, int size) { return size > 0 && extradata[0] == 1; }

}  // namespace

DecoderPool::DecoderPool(int max_idle) : max_idle_(std::max(1, max_idle)) {}

DecoderPool::~DecoderPool() = default;

DecoderPool::Key DecoderPool::KeyOf(const VideoDecoder& decoder) {
  const AVCodecContext& context = *decoder.get();
  // A decoder on NVDEC says AV_PIX_FMT_CUDA; the stream's own format is the software one.
  const int format = context.hw_frames_ctx != nullptr ? context.sw_pix_fmt : context.pix_fmt;
  return Key{context.codec_id,
             context.width,
             context.height,
             format,
             LengthPrefixed(context.extradata, context.extradata_size),
             decoder.nvdec.device()};
}

absl::StatusOr<VideoDecoder> DecoderPool::Take(const AVStream& stream, const AVCodec* codec,
                                               int max_frame_side, const NvdecDevice* nvdec) {
  const AVCodecParameters& parameters = *stream.codecpar;
  const Key wanted{parameters.codec_id,
                   parameters.width,
                   parameters.height,
                   parameters.format,
                   LengthPrefixed(parameters.extradata, parameters.extradata_size),
                   nvdec};
  std::unique_ptr<VideoDecoder> found;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto match = std::find_if(idle_.begin(), idle_.end(),
                                    [&](const Idle& idle) { return idle.key == wanted; });
    if (match != idle_.end()) {
      found = std::move(match->decoder);
      idle_.erase(match);
      ++reuses_;
    }
  }
  if (found == nullptr) {
    absl::StatusOr<VideoDecoder> opened =
        OpenVideoDecoder(stream, codec, /*threads=*/1, max_frame_side, nvdec);
    if (opened.ok()) opened->keep_set_up = true;
    return opened;
  }
  // What the container says of the pictures and their timing, for this stream.
  AVCodecContext& context = *found->get();
  context.pkt_timebase = stream.time_base;
  context.color_range = parameters.color_range;
  context.color_primaries = parameters.color_primaries;
  context.color_trc = parameters.color_trc;
  context.colorspace = parameters.color_space;
  context.chroma_sample_location = parameters.chroma_location;
  context.sample_aspect_ratio = parameters.sample_aspect_ratio;
  context.skip_frame = AVDISCARD_DEFAULT;  // the last clip may have left it skipping frames
  found->decoded_another_stream = true;
  return std::move(*found);
}

void DecoderPool::Give(VideoDecoder decoder) {
  Idle idle{KeyOf(decoder), std::make_unique<VideoDecoder>(std::move(decoder))};
  std::unique_ptr<VideoDecoder> freed;  // freed outside the lock
  std::lock_guard<std::mutex> lock(mutex_);
  if (static_cast<int>(idle_.size()) >= max_idle_) {
    freed = std::move(idle_.front().decoder);
    idle_.pop_front();
  }
  idle_.push_back(std::move(idle));
}

int DecoderPool::idle() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int>(idle_.size());
}

int64_t DecoderPool::reuses() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reuses_;
}

}  // namespace vidclf::media
