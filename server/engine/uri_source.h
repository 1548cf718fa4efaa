// A source the server pulls itself (a camera's RTSP, an HTTP stream, a file), followed again with
// back-off when it drops, with frame indices and times going on across connections.
#ifndef VIDCLF_SERVER_ENGINE_URI_SOURCE_H_
#define VIDCLF_SERVER_ENGINE_URI_SOURCE_H_

#include <functional>
#include <string>

#include "absl/time/time.h"
#include "media/live_decoder.h"
#include "media/uri_allowlist.h"
#include "server/engine/frame_source.h"

namespace vidclf::engine {

// What became of a source the stream pulls.
struct SourceEvent {
  enum class Kind { kConnected, kDropped };
  Kind kind = Kind::kConnected;
  // kConnected: connections so far, from 1. kDropped: the number of the attempt to follow the
  // source again that comes next, from 1 (it restarts once a connection brings frames).
  int attempt = 0;
  // kConnected: what the source holds. kDropped: why it dropped.
  std::string message;
  double retry_in_seconds = 0;
  int64_t frames_seen = 0;
};

// How long to wait before attempt `attempt` (from 1) to follow a dropped source again: half a
// second, then twice as long each time up to 8 s, spread by up to 20% either way so that the
// watchers of one camera that restarts do not all knock at once (gRPC's connection back-off).
absl::Duration ReconnectDelay(int attempt);

class UriSource : public FrameSource {
 public:
  struct Options {
    std::string uri;
    // Must allow `uri` and outlive the source.
    const media::UriAllowlist* allowlist = nullptr;
    // decode.cancellation, when set, also stops the following again.
    media::LiveDecodeOptions decode;
    // A source that sends nothing for this long has dropped.
    absl::Duration stall_timeout = absl::Seconds(10);
    // Failed attempts in a row to follow the source again before giving up; 0: none; negative:
    // no limit (a registered camera).
    int max_reconnects = 5;
    // FFmpeg input options (media::ValidateInputOptions): rtsp_transport, say.
    media::InputOptions input_options;
    // Frames are handed on no faster than their media times pass, from the first one handed on
    // after each connection.
    bool realtime = false;
    // Where a resumed stream goes on: a file:// source (which has an end, and its own frame
    // numbers) skips its frames before first_index; any other numbers its frames from
    // first_index, at first_seconds.
    int64_t first_index = 0;
    double first_seconds = 0;
  };
  struct Callbacks {
    // Each connection, and each drop that will be followed again.
    std::function<void(const SourceEvent&)> on_event;
    // Waits `delay` before the next attempt; false when the stream failed meanwhile, which ends
    // Run with OK (the stream reports its own failure).
    std::function<bool(absl::Duration delay)> wait;
    // Just before each attempt to follow the source again.
    std::function<void()> on_reconnect;
  };

  UriSource(Options options, Callbacks callbacks)
      : options_(std::move(options)), callbacks_(std::move(callbacks)) {}

  // Follows the source again after each drop (UNAVAILABLE), and after NOT_FOUND from a network
  // source, which is what relays and recorders answer while the camera behind them is away.
  // Credentials refused (PERMISSION_DENIED) and every other error end it at once: cameras lock
  // accounts after a few failed logins. UNAVAILABLE once max_reconnects attempts in a row failed.
  absl::Status Run(const FrameHandler& on_frame) override;

 private:
  const Options options_;
  const Callbacks callbacks_;
};

}  // namespace vidclf::engine

#endif  // VIDCLF_SERVER_ENGINE_URI_SOURCE_H_
