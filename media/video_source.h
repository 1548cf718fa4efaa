// Where an encoded video comes from: its bytes in memory, bytes that another thread appends to a
// ByteStream while it is decoded (an upload in progress), or a URI that the decoder pulls.
#ifndef VIDCLF_MEDIA_VIDEO_SOURCE_H_
#define VIDCLF_MEDIA_VIDEO_SOURCE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"
#include "media/byte_stream.h"

namespace vidclf::media {

class VideoSource {
 public:
  // Empty bytes, which a decode refuses.
  VideoSource() = default;

  // `bytes` must outlive the decode.
  static VideoSource Bytes(absl::string_view bytes) {
    VideoSource source;
    source.bytes_ = bytes;
    return source;
  }
  // Shares `stream` with the producer that fills it.
  static VideoSource Stream(std::shared_ptr<ByteStream> stream) {
    VideoSource source;
    source.stream_ = std::move(stream);
    return source;
  }
  // `stream` must outlive the decode.
  static VideoSource Stream(ByteStream& stream) {
    return Stream(std::shared_ptr<ByteStream>(std::shared_ptr<ByteStream>(), &stream));
  }
  // Allowed or not by ClipOptions::uri_allowlist.
  static VideoSource Uri(std::string uri) {
    VideoSource source;
    source.uri_ = std::move(uri);
    return source;
  }

  // Set for Stream, else null.
  ByteStream* stream() const { return stream_.get(); }
  // Not empty for Uri.
  const std::string& uri() const { return uri_; }
  // Bytes's; empty for the others.
  absl::string_view bytes() const { return bytes_; }
  // Whether the bytes arrive while they are decoded (Stream and Uri), so that a decode may wait.
  bool arrives_while_decoding() const { return stream_ != nullptr || !uri_.empty(); }

 private:
  absl::string_view bytes_;
  std::shared_ptr<ByteStream> stream_;
  std::string uri_;
};

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_VIDEO_SOURCE_H_
