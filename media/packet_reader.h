// Where a clip decode takes the video stream's packets from: a demuxer that can seek (memory
// input), or the packets a single-pass source's listing kept. Internal to the clip decoder.
#ifndef VIDCLF_MEDIA_PACKET_READER_H_
#define VIDCLF_MEDIA_PACKET_READER_H_

#include <cstdint>
#include <memory>

#include "media/av_util.h"
#include "media/demuxer.h"
#include "media/frame_table.h"

namespace vidclf::media {

class PacketReader {
 public:
  virtual ~PacketReader() = default;
  // The next packet of the video stream; false at the end, or where the input is damaged.
  virtual bool Next(AVPacket* packet) = 0;
  // Moves to the keyframe presented at `pts`, or near it; false when the reader cannot.
  virtual bool SeekToKeyframe(int64_t pts) = 0;
  // Whether SeekToKeyframe lands on the keyframe asked for, rather than searching for it by
  // timestamp and perhaps landing past it (a demuxer without an index, as MPEG-TS's).
  virtual bool SeeksExactly() const = 0;
};

// Reads a demuxer that can seek (memory input).
class DemuxerPacketReader : public PacketReader {
 public:
  // Reads Matroska's index at once, by seeking to the start.
  DemuxerPacketReader(std::unique_ptr<Demuxer> demuxer, int stream_index);
  bool Next(AVPacket* packet) override;
  bool SeekToKeyframe(int64_t pts) override;
  bool SeeksExactly() const override;  // when the demuxer has an index for the stream

 private:
  std::unique_ptr<Demuxer> demuxer_;
  AVFormatContext* format_;
  int stream_index_;
};

// Reads the packets that a single-pass source's listing kept; seeking is exact.
class ListPacketReader : public PacketReader {
 public:
  explicit ListPacketReader(const PacketList& packets) : packets_(packets) {}
  bool Next(AVPacket* packet) override;
  bool SeekToKeyframe(int64_t pts) override;
  bool SeeksExactly() const override { return true; }

 private:
  const PacketList& packets_;
  size_t next_ = 0;
};

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_PACKET_READER_H_
