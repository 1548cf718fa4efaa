// Reads a video source as a live camera would send it: its video stream, copied without
// re-encoding into live Matroska, handed on in chunks as each packet is written.
//
// Why Matroska for every codec: its blocks say how long they are, so the server's demuxer hands
// on a frame as soon as its last byte arrives. MPEG-TS, which cameras send, holds each frame
// until the next one's bytes start: its PES packets carry no length (FFmpeg's muxer omits it for
// video), and the H.264 and HEVC parsers then find a frame's end only at the next one's start.
// Measured with one 25 fps feed, the server's update latency was 94 ms over MPEG-TS and 14 ms over
// Matroska, what its work takes (docs/streaming-benchmark.md).
#ifndef VIDCLF_MEDIA_FEED_REMUXER_H_
#define VIDCLF_MEDIA_FEED_REMUXER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/cancellation.h"

struct AVFormatContext;
struct AVIOContext;
struct AVPacket;
struct AVStream;

namespace vidclf::media {

struct FeedRemuxerOptions {
  // Send each packet no earlier than its decoding time after the first packet's, as a camera
  // would; otherwise as fast as the source is read and the sink takes the bytes.
  bool realtime = false;
  // Largest piece of the feed handed to the sink at once, in bytes.
  int chunk_bytes = 64 * 1024;
  // The source's format or device, as `ffmpeg -f` takes it before -i ("v4l2", "rawvideo",
  // "mjpeg"); empty: guessed from the bytes, and V4L2 for a character device.
  std::string input_format;
  // Options for the source's demuxer, device or protocol, as `ffmpeg -KEY VALUE` takes them
  // before -i: {"video_size", "640x480"}, {"input_format", "mjpeg"}, {"rtsp_transport", "tcp"}.
  std::vector<std::pair<std::string, std::string>> input_options;
  // When set, opening and running stop once it is cancelled, with its reason: between packets,
  // during the realtime wait, and within 50 ms during a read that waits for a network source or
  // standard input. Must outlive the remuxer.
  const CancellationToken* cancellation = nullptr;
};

// One source, read once. Not thread-safe: one thread opens and runs it.
class FeedRemuxer {
 public:
  // Receives the next bytes of the feed, in order, valid only during the call. An error stops
  // the remuxer, which returns it.
  using Sink = std::function<absl::Status(absl::string_view bytes)>;

  // Opens `source` and finds its video stream. A source is
  //   "-"                  standard input, in any container FFmpeg demuxes as it arrives
  //                        (its other streams are dropped and its video remuxed like a file's)
  //   a character device   a V4L2 camera (/dev/video0), through libavdevice, unless
  //                        options.input_format names another device
  //   anything with "://"  a URL libavformat reads (http, https, rtsp, rtmp, udp, ...)
  //   anything else        a file path.
  // Errors:
  //   NOT_FOUND           no such file or device, or HTTP 404
  //   PERMISSION_DENIED   the file, device or URL refuses access
  //   INVALID_ARGUMENT    not a container FFmpeg reads, no video stream, a codec Matroska
  //                       cannot carry, an unknown protocol, input format or option
  //   UNAVAILABLE         the source cannot be reached or is busy
  //   the cancellation's reason.
  static absl::StatusOr<std::unique_ptr<FeedRemuxer>> Open(const std::string& source,
                                                           FeedRemuxerOptions options);

  // Closes the source. Closing may still talk to it for up to a second, even once cancelled: an
  // RTSP camera is sent its TEARDOWN, so that it frees the session at once.
  ~FeedRemuxer();
  FeedRemuxer(const FeedRemuxer&) = delete;
  FeedRemuxer& operator=(const FeedRemuxer&) = delete;

  // The video stream's codec ("h264") and size in pixels (0 when the source does not say).
  std::string codec_name() const;
  int width() const;
  int height() const;

  // Writes the container's header, then each video packet of the source as soon as it is read
  // (or due, when realtime) until the source ends, then the trailer. Packets before the first
  // keyframe are skipped: a feed joined midway cannot decode them. Returns OK at the end of the
  // source; the sink's error; the cancellation's reason; UNAVAILABLE when reading the source
  // fails, or when a source that has no end of its own (rtsp://, rtmp://, udp://, srt://) stops;
  // INVALID_ARGUMENT when its packets cannot be remuxed. Call once.
  absl::Status Run(const Sink& sink);

  // Video packets handed to the muxer so far.
  int64_t packets_written() const { return packets_written_; }

 private:
  FeedRemuxer() = default;

  // Opens input_ (with stdin_io_ for "-") and finds its video stream.
  absl::Status OpenInput(const std::string& source);
  // Creates output_, live Matroska with one stream copying the input's video stream.
  absl::Status CreateOutput();
  // Sets the packet's missing or non-increasing timestamps, converts them to the output's time
  // base, waits for its time when realtime, and writes it.
  absl::Status WritePacket(AVPacket* packet);
  // Sleeps until `seconds` after the first packet was written; the cancellation's reason if it
  // is cancelled meanwhile.
  absl::Status WaitUntil(double seconds);
  bool Cancelled() const;
  absl::Status CancelledStatus() const;
  // The status for a libav error while reading the source or writing the feed.
  absl::Status ReadError(int error_code) const;
  absl::Status WriteError(absl::string_view what, int error_code) const;

  static int ReadStdin(void* opaque, uint8_t* buffer, int size);
  static int WriteToSink(void* opaque, uint8_t* buffer, int size);
  static int Interrupt(void* opaque);

  FeedRemuxerOptions options_;
  std::string source_;
  AVFormatContext* input_ = nullptr;
  AVIOContext* stdin_io_ = nullptr;
  AVStream* input_stream_ = nullptr;
  AVFormatContext* output_ = nullptr;
  AVIOContext* output_io_ = nullptr;
  const Sink* sink_ = nullptr;
  // Set by the destructor: the interrupt callback then lets the close talk to the source.
  std::optional<std::chrono::steady_clock::time_point> closing_until_;
  absl::Status sink_error_;
  bool ran_ = false;

  // Until the first keyframe (codecs whose every frame is one have none to wait for).
  bool waiting_for_keyframe_ = true;
  // Packets written, the first's decoding time (seconds, on the source's clock) and when it was
  // written, for realtime pacing; the last decoding time written, in the output's time base, to
  // keep them increasing.
  int64_t packets_written_ = 0;
  double first_packet_seconds_ = 0;
  std::chrono::steady_clock::time_point first_packet_written_;
  int64_t last_dts_ = 0;
};

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_FEED_REMUXER_H_
