// Decodes an encoded video (in memory, arriving in chunks, or at a URI) into a clip of sampled,
// preprocessed frames: the one entry point of media/ for whole clips.
#ifndef VIDCLF_MEDIA_CLIP_DECODER_H_
#define VIDCLF_MEDIA_CLIP_DECODER_H_

#include "absl/status/statusor.h"
#include "media/clip_options.h"
#include "media/video_source.h"

namespace vidclf::media {

// Decodes the video `source` names (any container and video codec the linked FFmpeg reads) and
// returns the frames that `options` asks for. Errors:
//   INVALID_ARGUMENT    empty or undecodable input, no video stream, unsupported codec, bad
//                       sampling options
//   RESOURCE_EXHAUSTED  input, frame size or frame count over the limits in `options`
//   DEADLINE_EXCEEDED   decoding ran past options.decode_timeout_ms
// Thread-safe: every call uses its own libav state.
//
// Bytes in memory are listed, then decoded in a second pass that may seek.
//
// A stream's bytes are decoded as they arrive. Streamable containers (MPEG-TS, Matroska/WebM,
// fragmented or fast-start MP4, raw H.264/HEVC, MJPEG, Ogg and others) are demuxed as the bytes
// arrive and only the video packets are kept; any other container, such as an MP4 whose moov box
// comes last, is buffered whole first (DecodedClip.buffered_whole_input, and a line in FFmpeg's
// debug log). The result equals the one from the same bytes in memory. The stream's own max_bytes
// is its size limit; options.max_input_bytes is not used. More errors: the stream's read_error()
// (its abort status, RESOURCE_EXHAUSTED over its limit, DEADLINE_EXCEEDED when bytes stop arriving
// within options.decode_timeout_ms). Closes the stream's reader side on return.
//
// A URI (http, https, rtsp, rtmp, file, ... as the linked FFmpeg supports) is opened when
// options.uri_allowlist allows it; see Demuxer::OpenUri for the rules and the errors it adds, and
// UNAVAILABLE when the source breaks off. A live source ends once a sampling with a frame count
// ("window", "fps", "all") has its frames; with "uniform" it runs into the limits.
absl::StatusOr<DecodedClip> DecodeClip(const VideoSource& source, const ClipOptions& options);

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_CLIP_DECODER_H_
