// Feeds bytes to the media library's incremental source in chunks, as a gRPC stream would.
#ifndef VIDCLF_TESTS_TEST_UTIL_CHUNKED_INPUT_H_
#define VIDCLF_TESTS_TEST_UTIL_CHUNKED_INPUT_H_

#include <cstddef>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "media/byte_stream.h"
#include "media/clip_decoder.h"

namespace vidclf::testing {

// Decodes `bytes` with DecodeClipFromStream while another thread appends them `chunk_bytes` at a
// time. The producer stops early when the decoder has stopped reading.
inline absl::StatusOr<media::DecodedClip> DecodeInChunks(absl::string_view bytes,
                                                         size_t chunk_bytes,
                                                         const media::ClipOptions& options) {
  media::ByteStream input(options.max_input_bytes);
  std::thread producer([&] {
    for (size_t at = 0; at < bytes.size(); at += chunk_bytes) {
      if (!input.Append(bytes.substr(at, chunk_bytes)).ok()) return;
    }
    input.Finish();
  });
  absl::StatusOr<media::DecodedClip> clip = media::DecodeClipFromStream(input, options);
  producer.join();
  return clip;
}

}  // namespace vidclf::testing

#endif  // VIDCLF_TESTS_TEST_UTIL_CHUNKED_INPUT_H_
