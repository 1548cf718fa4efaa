// Process-wide libav settings. Executables apply them once, early in main, before any thread
// decodes; every decoding entry point also makes sure of the defaults, so that a program that
// never configures libav still gets the allocation cap.
#ifndef VIDCLF_MEDIA_LIBAV_SETTINGS_H_
#define VIDCLF_MEDIA_LIBAV_SETTINGS_H_

#include <cstddef>
#include <optional>
#include <string>

namespace vidclf::media {

struct LibavSettings {
  // Caps every libav allocation. A few bytes of a crafted container can declare millions of
  // samples (an MP4 trun box), for which the demuxer would allocate gigabytes of index; the
  // largest legitimate buffer, one plane of an 8192x8192 16-bit frame, is 128 MiB.
  size_t max_allocation_bytes = size_t{256} << 20;
  // libav's log level (AV_LOG_QUIET ... AV_LOG_DEBUG); unset leaves libav's own.
  std::optional<int> log_level;
};

// Applies `settings`; a later call replaces them. Thread-safe, but a decode already running may
// see either value.
void ConfigureLibav(const LibavSettings& settings);

// Applies the default settings unless ConfigureLibav has run. Thread-safe and cheap once done.
void EnsureLibavConfigured();

// The FFmpeg release this process has loaded ("5.1.6-0+deb12u1"), for --version.
std::string LibavVersion();

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_LIBAV_SETTINGS_H_
