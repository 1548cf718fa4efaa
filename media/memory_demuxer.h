// Demuxes a container held in memory, through a custom AVIOContext: no temporary files.
#ifndef VIDCLF_MEDIA_MEMORY_DEMUXER_H_
#define VIDCLF_MEDIA_MEMORY_DEMUXER_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "media/av_util.h"

namespace vidclf::media {

// Owns an AVFormatContext whose input is a caller-owned byte buffer.
//
// The buffer must outlive the demuxer. Not thread-safe; one demuxer serves one reader.
class MemoryDemuxer {
 public:
  // Probes the container format and reads its header. Fails with INVALID_ARGUMENT when the bytes
  // are not a container libavformat recognises.
  static absl::StatusOr<std::unique_ptr<MemoryDemuxer>> Open(absl::string_view bytes);

  ~MemoryDemuxer();
  MemoryDemuxer(const MemoryDemuxer&) = delete;
  MemoryDemuxer& operator=(const MemoryDemuxer&) = delete;

  AVFormatContext* format() const { return format_; }

 private:
  explicit MemoryDemuxer(absl::string_view bytes) : bytes_(bytes) {}

  static int Read(void* opaque, uint8_t* buffer, int size);
  static int64_t Seek(void* opaque, int64_t offset, int whence);

  absl::string_view bytes_;
  int64_t position_ = 0;
  AVIOContext* io_ = nullptr;
  AVFormatContext* format_ = nullptr;
};

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_MEMORY_DEMUXER_H_
