#include "media/packet_reader.h"

#include <utility>

extern "C" {
#include <libavformat/avformat.h>
}

namespace vidclf::media {

DemuxerPacketReader::DemuxerPacketReader(std::unique_ptr<Demuxer> demuxer, int stream_index)
    : demuxer_(std::move(demuxer)), format_(demuxer_->format()), stream_index_(stream_index) {}

bool DemuxerPacketReader::Next(AVPacket* packet) {
  while (av_read_frame(format_, packet) >= 0) {
    if (packet->stream_index == stream_index_) return true;
    av_packet_unref(packet);
  }
  return false;
}

bool DemuxerPacketReader::SeekToKeyframe(int64_t pts) {
  // Before a headerless format's stream has appeared there is nothing to seek in.
  if (stream_index_ >= static_cast<int>(format_->nb_streams)) return false;
  return av_seek_frame(format_, stream_index_, pts, AVSEEK_FLAG_BACKWARD) >= 0;
}

bool DemuxerPacketReader::SeeksExactly() const {
  return stream_index_ < static_cast<int>(format_->nb_streams) &&
         avformat_index_get_entries_count(format_->streams[stream_index_]) > 0;
}

bool ListPacketReader::Next(AVPacket* packet) {
  return next_ < packets_.size() && av_packet_ref(packet, packets_[next_++].get()) >= 0;
}

bool ListPacketReader::SeekToKeyframe(int64_t pts) {
  for (size_t i = 0; i < packets_.size(); ++i) {
    if (packets_[i]->pts == pts) {
      next_ = i;
      return true;
    }
  }
  return false;
}

}  // namespace vidclf::media
