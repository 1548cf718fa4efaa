#include "media/memory_demuxer.h"

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"

namespace vidclf::media {
namespace {
// libavformat reads through this buffer; 64 KiB is its own default for file input.
constexpr int kIoBufferBytes = 64 * 1024;
}  // namespace

absl::StatusOr<std::unique_ptr<MemoryDemuxer>> MemoryDemuxer::Open(absl::string_view bytes) {
  std::unique_ptr<MemoryDemuxer> demuxer(new MemoryDemuxer(bytes));
  auto* io_buffer = static_cast<unsigned char*>(av_malloc(kIoBufferBytes));
  if (io_buffer == nullptr) return absl::ResourceExhaustedError("out of memory for the I/O buffer");
  demuxer->io_ =
      avio_alloc_context(io_buffer, kIoBufferBytes, /*write_flag=*/0, demuxer.get(),
                         &MemoryDemuxer::Read, /*write_packet=*/nullptr, &MemoryDemuxer::Seek);
  if (demuxer->io_ == nullptr) {
    av_free(io_buffer);
    return absl::ResourceExhaustedError("out of memory for the I/O context");
  }
  demuxer->format_ = avformat_alloc_context();
  if (demuxer->format_ == nullptr) return absl::ResourceExhaustedError("out of memory");
  demuxer->format_->pb = demuxer->io_;
  demuxer->format_->flags |= AVFMT_FLAG_CUSTOM_IO;
  // On failure avformat_open_input frees the context and nulls the pointer; the custom I/O context
  // stays ours and the destructor frees it.
  const int result = avformat_open_input(&demuxer->format_, nullptr, nullptr, nullptr);
  if (result < 0) {
    return AvError(absl::StatusCode::kInvalidArgument,
                   "input is not a video container FFmpeg can read", result);
  }
  return demuxer;
}

MemoryDemuxer::~MemoryDemuxer() {
  avformat_close_input(&format_);
  if (io_ != nullptr) av_freep(&io_->buffer);
  avio_context_free(&io_);
}

int MemoryDemuxer::Read(void* opaque, uint8_t* buffer, int size) {
  auto* self = static_cast<MemoryDemuxer*>(opaque);
  const int64_t left = static_cast<int64_t>(self->bytes_.size()) - self->position_;
  if (left <= 0) return AVERROR_EOF;
  const int n = static_cast<int>(std::min<int64_t>(left, size));
  std::memcpy(buffer, self->bytes_.data() + self->position_, n);
  self->position_ += n;
  return n;
}

int64_t MemoryDemuxer::Seek(void* opaque, int64_t offset, int whence) {
  auto* self = static_cast<MemoryDemuxer*>(opaque);
  const auto size = static_cast<int64_t>(self->bytes_.size());
  int64_t target = 0;
  switch (whence & ~AVSEEK_FORCE) {
    case AVSEEK_SIZE:
      return size;
    case SEEK_SET:
      target = offset;
      break;
    case SEEK_CUR:
      target = self->position_ + offset;
      break;
    case SEEK_END:
      target = size + offset;
      break;
    default:
      return AVERROR(EINVAL);
  }
  if (target < 0 || target > size) return AVERROR(EINVAL);
  self->position_ = target;
  return target;
}

}  // namespace vidclf::media
