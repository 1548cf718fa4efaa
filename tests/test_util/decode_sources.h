// DecodeClip from the sources tests build: bytes fed in chunks, as a gRPC stream would, and URIs
// under an allowlist.
#ifndef VIDCLF_TESTS_TEST_UTIL_DECODE_SOURCES_H_
#define VIDCLF_TESTS_TEST_UTIL_DECODE_SOURCES_H_

#include <cstddef>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "media/byte_stream.h"
#include "media/clip_decoder.h"
#include "media/uri_allowlist.h"

namespace vidclf::testing {

// Decodes `bytes` from a stream while another thread appends them `chunk_bytes` at a
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
  absl::StatusOr<media::DecodedClip> clip =
      media::DecodeClip(media::VideoSource::Stream(input), options);
  producer.join();
  return clip;
}

// Decodes `uri` with `options`, allowed by `allowlist`.
inline absl::StatusOr<media::DecodedClip> DecodeUri(const std::string& uri,
                                                    const media::UriAllowlist& allowlist,
                                                    media::ClipOptions options) {
  options.uri_allowlist = &allowlist;
  return media::DecodeClip(media::VideoSource::Uri(uri), options);
}

}  // namespace vidclf::testing

#endif  // VIDCLF_TESTS_TEST_UTIL_DECODE_SOURCES_H_
