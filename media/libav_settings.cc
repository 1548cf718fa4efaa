#include "media/libav_settings.h"

#include <atomic>
#include <mutex>

extern "C" {
#include <libavutil/avutil.h>
#include <libavutil/log.h>
#include <libavutil/mem.h>
}

namespace vidclf::media {
namespace {

std::mutex settings_mutex;
std::atomic<bool> configured{false};

}  // namespace

void ConfigureLibav(const LibavSettings& settings) {
  std::lock_guard<std::mutex> lock(settings_mutex);
  av_max_alloc(settings.max_allocation_bytes);
  if (settings.log_level.has_value()) av_log_set_level(*settings.log_level);
  configured.store(true, std::memory_order_release);
}

void EnsureLibavConfigured() {
  if (configured.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(settings_mutex);
  if (configured.load(std::memory_order_relaxed)) return;
  av_max_alloc(LibavSettings{}.max_allocation_bytes);
  configured.store(true, std::memory_order_release);
}

std::string LibavVersion() { return av_version_info(); }

}  // namespace vidclf::media
