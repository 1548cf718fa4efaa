#include "media/decoder_feed.h"

#include <algorithm>
#include <cstring>

extern "C" {
#include <libavutil/error.h>
}

namespace vidclf::media {
namespace {

// libavcodec's H.264 decoder holds at most 16 frames back.
constexpr int kMaxHeldFrames = 16;
constexpr int kIdrSliceType = 5;

// The NAL unit type of the byte after a prefix.
int NalType(uint8_t header) { return header & 0x1f; }

}  // namespace

DecoderFeed::DecoderFeed(VideoDecoder& decoder, const AVStream& stream)
    : decoder_(decoder),
      stream_(stream),
      fill_(decoder.keep_set_up && decoder.get()->codec_id == AV_CODEC_ID_H264 &&
            (decoder.get()->active_thread_type & FF_THREAD_FRAME) == 0) {
  const AVCodecParameters& parameters = *stream.codecpar;
  // An avcC record (version 1) says how long the length prefixes are; Annex B has none.
  if (parameters.extradata_size >= 5 && parameters.extradata[0] == 1) {
    nal_length_bytes_ = (parameters.extradata[4] & 3) + 1;
  }
}

int DecoderFeed::Send(AVPacket* packet) {
  const AVCodecParameters& parameters = *stream_.codecpar;
  if (decoder_.decoded_another_stream && !parameter_sets_sent_ && parameters.extradata_size > 0) {
    uint8_t* side =
        av_packet_new_side_data(packet, AV_PKT_DATA_NEW_EXTRADATA, parameters.extradata_size);
    if (side == nullptr) return AVERROR(ENOMEM);
    std::memcpy(side, parameters.extradata, parameters.extradata_size);
  }
  parameter_sets_sent_ = true;
  if (fill_ && (packet->flags & AV_PKT_FLAG_KEY) != 0 && HoldsIdrSlice(*packet)) {
    PacketPtr idr(av_packet_alloc());
    if (!idr || av_packet_ref(idr.get(), packet) < 0) return AVERROR(ENOMEM);
    av_packet_free_side_data(idr.get());
    idr->pts = idr->dts = kFillerPts;
    idr_ = std::move(idr);
  }
  sent_since_run_ended_ = true;
  return avcodec_send_packet(decoder_.get(), packet);
}

absl::Status DecoderFeed::EndRun(HeldFrames held, const std::function<absl::Status()>& drain) {
  if (!sent_since_run_ended_) return absl::OkStatus();
  sent_since_run_ended_ = false;
  AVCodecContext* decoder = decoder_.get();
  if (idr_ == nullptr) {
    absl::Status status;
    if (held == HeldFrames::kWanted) {
      avcodec_send_packet(decoder, nullptr);
      status = drain();
    }
    avcodec_flush_buffers(decoder);
    return status;
  }
  // Each filler decoded past the held frames pushes one out; the held frames come out before it.
  for (int sent = 0; sent <= std::min(decoder->has_b_frames, kMaxHeldFrames); ++sent) {
    PacketPtr filler(av_packet_clone(idr_.get()));
    if (!filler) return absl::ResourceExhaustedError("out of memory");
    const int result = avcodec_send_packet(decoder, filler.get());
    if (result < 0 && result != AVERROR(EAGAIN)) {
      return AvError(absl::StatusCode::kInvalidArgument, "video decoding failed", result);
    }
    if (auto status = drain(); !status.ok()) return status;
  }
  return absl::OkStatus();
}

bool DecoderFeed::RunEndSetsUpAnew() const {
  const AVCodecContext& decoder = *decoder_.get();
  return !fill_ && decoder.hw_device_ctx != nullptr && decoder.codec_id == AV_CODEC_ID_H264;
}

bool DecoderFeed::HoldsIdrSlice(const AVPacket& packet) const {
  const uint8_t* data = packet.data;
  const int64_t size = packet.size;
  int64_t at = 0;
  while (at < size) {
    int64_t unit = 0;  // where the NAL unit's header byte is
    int64_t next = 0;  // where the next prefix starts
    if (nal_length_bytes_ > 0) {
      if (at + nal_length_bytes_ >= size) return false;
      int64_t length = 0;
      for (int i = 0; i < nal_length_bytes_; ++i) length = length << 8 | data[at + i];
      unit = at + nal_length_bytes_;
      next = unit + length;
    } else {
      // A start code: 00 00 01 (or 00 00 00 01, whose first zero ends the unit before).
      const uint8_t* start = nullptr;
      for (int64_t i = at; i + 3 < size && start == nullptr; ++i) {
        if (data[i] == 0 && data[i + 1] == 0 && data[i + 2] == 1) start = data + i;
      }
      if (start == nullptr) return false;
      unit = start - data + 3;
      next = unit + 1;
    }
    if (unit < size && NalType(data[unit]) == kIdrSliceType) return true;
    at = next;
  }
  return false;
}

}  // namespace vidclf::media
