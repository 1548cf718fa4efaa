#include "media/packet_reader.h"

#include <cstring>
#include <limits>
#include <utility>

extern "C" {
#include <libavformat/avformat.h>
}

namespace vidclf::media {

DemuxerPacketReader::DemuxerPacketReader(std::unique_ptr<Demuxer> demuxer, int stream_index)
    : demuxer_(std::move(demuxer)), format_(demuxer_->format()), stream_index_(stream_index) {
  // Matroska reads its index (the cues) at the first seek, not with its header: seeking to the
  // first keyframe reads it now, so that SeeksExactly() can let a second decoder start at a later
  // one, and reading then starts where it would have. A file without cues (written live) is
  // indexed as it is read instead; its keyframes are found by reading on from the last indexed.
  // The search runs forward from the earliest time: a backward one fails where no keyframe lies
  // at or before the time asked for (a feed whose timestamps start late), and a failed seek leaves
  // the demuxer at the end of the file.
  if (stream_index_ < static_cast<int>(format_->nb_streams) &&
      std::strcmp(format_->iformat->name, "matroska,webm") == 0) {
    av_seek_frame(format_, stream_index_, std::numeric_limits<int64_t>::min(), /*flags=*/0);
  }
}

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
