#include "server/internal_errors.h"

#include <spdlog/spdlog.h>

#include <exception>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "media/quoted_text.h"

namespace vidclf {
namespace {

struct Place {
  int64_t count = 0;
  int64_t unlogged = 0;  // since the last line
  absl::Time last_logged = absl::InfinitePast();
};

absl::Mutex places_mutex;
std::map<std::string, Place>& Places() ABSL_EXCLUSIVE_LOCKS_REQUIRED(places_mutex) {
  static auto* places = [] {
    auto* all = new std::map<std::string, Place>();
    for (absl::string_view where : kInternalErrorPlaces) (*all)[std::string(where)];
    return all;
  }();
  return *places;
}

}  // namespace

void ReportInternalError(absl::string_view where, absl::string_view request,
                         absl::string_view what) {
  int64_t suppressed = 0;
  {
    absl::MutexLock lock(&places_mutex);
    Place& place = Places()[std::string(where)];
    ++place.count;
    const absl::Time now = absl::Now();
    if (now - place.last_logged < absl::Seconds(1)) {
      ++place.unlogged;
      return;
    }
    place.last_logged = now;
    suppressed = place.unlogged;
    place.unlogged = 0;
  }
  spdlog::error(
      "internal error ({}) while handling {}: {}{}", std::string(where), std::string(request),
      media::ValidUtf8(what).substr(0, 512),
      suppressed > 0 ? " (" + std::to_string(suppressed) + " more since the last line)" : "");
}

std::string CurrentExceptionText() {
  try {
    throw;
  } catch (const std::exception& error) {
    return error.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

bool RunGuarded(absl::string_view where, absl::string_view request,
                const std::function<void()>& work) {
  try {
    work();
    return true;
  } catch (...) {
    ReportInternalError(where, request, CurrentExceptionText());
    return false;
  }
}

std::map<std::string, int64_t> InternalErrorCounts() {
  absl::MutexLock lock(&places_mutex);
  std::map<std::string, int64_t> counts;
  for (const auto& [where, place] : Places()) counts[where] = place.count;
  return counts;
}

}  // namespace vidclf
