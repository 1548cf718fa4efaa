#include "server/engine/uri_source.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace vidclf::engine {
namespace {

// A file ends; a network source (a camera, a relay) goes on, and may be away for a while.
bool HasEnd(absl::string_view uri) { return absl::StartsWithIgnoreCase(uri, "file:"); }

// Whether a connection that ended with `status` is worth following again.
bool WorthFollowingAgain(const absl::Status& status, absl::string_view uri) {
  if (absl::IsUnavailable(status)) return true;
  return absl::IsNotFound(status) && !HasEnd(uri);
}

}  // namespace

absl::Duration ReconnectDelay(int attempt) {
  const double base = std::min(0.5 * std::pow(2.0, attempt - 1), 8.0);
  thread_local std::mt19937 random(std::random_device{}());
  return absl::Seconds(base * std::uniform_real_distribution<double>(0.8, 1.2)(random));
}

absl::Status UriSource::Run(const FrameHandler& on_frame) {
  media::LiveSourceOptions source;
  source.stall_timeout = absl::ToChronoNanoseconds(options_.stall_timeout);
  source.input_options = options_.input_options;
  int connections = 0;
  int failed_attempts = 0;
  // Frame indices and times go on from one connection to the next: each connection's frames
  // are placed after the last one's, one frame period later.
  const bool has_end = HasEnd(options_.uri);
  int64_t first_index = has_end ? 0 : options_.first_index;
  double first_seconds = has_end ? 0 : options_.first_seconds;
  const int64_t skip_before = has_end ? options_.first_index : 0;
  double last_seconds = 0;
  double period = 1 / kDefaultPictureRate;
  source.on_connected = [&](absl::string_view description) {
    SourceEvent event;
    event.kind = SourceEvent::Kind::kConnected;
    event.attempt = ++connections;
    event.message = std::string(description);
    event.frames_seen = first_index;
    callbacks_.on_event(event);
  };
  const CancellationToken* cancellation = options_.decode.cancellation;
  while (true) {
    int64_t frames = 0;
    // Realtime: when the first frame handed on this connection was, in wall and media time.
    std::optional<std::pair<std::chrono::steady_clock::time_point, double>> paced_from;
    const absl::Status status = media::DecodeLiveUri(
        options_.uri, *options_.allowlist, source, options_.decode,
        [&](const media::LiveFrame& frame) {
          frames = frame.index + 1;
          const int64_t index = first_index + frame.index;
          const double seconds = first_seconds + frame.timestamp_seconds;
          if (frame.index > 0) period = seconds - last_seconds;
          last_seconds = seconds;
          if (index < skip_before) return absl::OkStatus();
          if (options_.realtime && !paced_from.has_value()) {
            paced_from.emplace(std::chrono::steady_clock::now(), seconds);
          } else if (options_.realtime) {
            const auto due = paced_from->first +
                             std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                 std::chrono::duration<double>(seconds - paced_from->second));
            const auto now = std::chrono::steady_clock::now();
            if (due > now && !callbacks_.wait(absl::FromChrono(due - now))) {
              return absl::CancelledError("the stream ended");
            }
          }
          return on_frame(SourceFrame{index, seconds, frame.arrived, frame.pixels});
        });
    if (!WorthFollowingAgain(status, options_.uri) ||
        (cancellation != nullptr && cancellation->cancelled())) {
      return status;
    }
    if (frames > 0) {
      failed_attempts = 0;
      first_index += frames;
      first_seconds = last_seconds + period;
    }
    if (options_.max_reconnects == 0) return status;
    if (options_.max_reconnects > 0 && failed_attempts >= options_.max_reconnects) {
      return absl::UnavailableError(
          absl::StrCat("gave up on the source after ", failed_attempts,
                       " attempts in a row to follow it again failed: ", status.message()));
    }
    SourceEvent event;
    event.kind = SourceEvent::Kind::kDropped;
    event.attempt = ++failed_attempts;
    event.message = std::string(status.message());
    const absl::Duration delay = ReconnectDelay(failed_attempts);
    event.retry_in_seconds = absl::ToDoubleSeconds(delay);
    event.frames_seen = first_index;
    callbacks_.on_event(event);
    if (!callbacks_.wait(delay)) return absl::OkStatus();
    callbacks_.on_reconnect();
  }
}

}  // namespace vidclf::engine
