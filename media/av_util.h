// Small RAII owners for libav objects and the conversion of libav error codes to absl::Status.
//
// Each owner is a std::unique_ptr with a deleter that calls the matching libav free function, so
// every error path releases what it allocated.
#ifndef VIDCLF_MEDIA_AV_UTIL_H_
#define VIDCLF_MEDIA_AV_UTIL_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/frame.h>
#include <libswscale/swscale.h>
}

namespace vidclf::media {

struct CodecContextDeleter {
  void operator()(AVCodecContext* context) const { avcodec_free_context(&context); }
};
struct FrameDeleter {
  void operator()(AVFrame* frame) const { av_frame_free(&frame); }
};
struct PacketDeleter {
  void operator()(AVPacket* packet) const { av_packet_free(&packet); }
};
struct SwsContextDeleter {
  void operator()(SwsContext* context) const { sws_freeContext(context); }
};

using CodecContextPtr = std::unique_ptr<AVCodecContext, CodecContextDeleter>;
using FramePtr = std::unique_ptr<AVFrame, FrameDeleter>;
using PacketPtr = std::unique_ptr<AVPacket, PacketDeleter>;
using SwsContextPtr = std::unique_ptr<SwsContext, SwsContextDeleter>;

// libav's text for an AVERROR code, e.g. "Invalid data found when processing input".
std::string AvErrorText(int error_code);

// An absl::Status of `code` whose message is "<what>: <libav's text for error_code>".
absl::Status AvError(absl::StatusCode code, absl::string_view what, int error_code);

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_AV_UTIL_H_
