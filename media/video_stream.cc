#include "media/video_stream.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "media/fragment_guard.h"

extern "C" {
#include <libavutil/dict.h>
#include <libavutil/display.h>
#include <libavutil/mem.h>
}

namespace vidclf::media {

std::string DescribeInput(const AVFormatContext& format) {
  std::vector<std::string> streams;
  for (unsigned i = 0; i < format.nb_streams; ++i) {
    const char* type = av_get_media_type_string(format.streams[i]->codecpar->codec_type);
    streams.push_back(type ? type : "unknown");
  }
  return absl::StrCat("format: ", format.iformat->name,
                      ", streams: ", streams.empty() ? "none" : absl::StrJoin(streams, ", "));
}

absl::Status CheckFrameSize(int64_t width, int64_t height, int max_frame_side) {
  if (width > max_frame_side || height > max_frame_side) {
    return absl::ResourceExhaustedError(absl::StrCat("video frames are ", width, "x", height,
                                                     "; the limit is ", max_frame_side,
                                                     " pixels on either side"));
  }
  return absl::OkStatus();
}

absl::Status CheckRawHeaderFrameSize(absl::string_view head, int max_frame_side) {
  std::vector<absl::string_view> tokens;        // whitespace-separated, PNM comments left out
  size_t header_end = absl::string_view::npos;  // P1 to P6: the first tokens are the header
  if (absl::StartsWith(head, "YUV4MPEG2")) header_end = head.find('\n');
  if (absl::StartsWith(head, "P7")) header_end = head.find("ENDHDR");
  for (absl::string_view rest = head.substr(0, header_end); !rest.empty() && tokens.size() < 16;) {
    const size_t begin = rest.find_first_not_of(" \t\r\n");
    if (begin == absl::string_view::npos) break;
    if (rest[begin] == '#') {
      const size_t line_end = rest.find('\n', begin);
      rest.remove_prefix(line_end == absl::string_view::npos ? rest.size() : line_end);
      continue;
    }
    const size_t end = std::min(rest.size(), rest.find_first_of(" \t\r\n#", begin));
    tokens.push_back(rest.substr(begin, end - begin));
    rest.remove_prefix(end);
  }
  int64_t width = -1, height = -1;
  const auto number = [](absl::string_view text, int64_t* value) {
    return absl::SimpleAtoi(text, value) && *value >= 0;
  };
  if (!tokens.empty() && tokens[0] == "YUV4MPEG2") {
    for (absl::string_view token : tokens) {
      if (absl::ConsumePrefix(&token, "W")) number(token, &width);
      if (absl::ConsumePrefix(&token, "H")) number(token, &height);
    }
  } else if (!tokens.empty() && tokens[0] == "P7") {
    for (size_t i = 1; i + 1 < tokens.size(); ++i) {
      if (tokens[i] == "WIDTH") number(tokens[i + 1], &width);
      if (tokens[i] == "HEIGHT") number(tokens[i + 1], &height);
    }
  } else if (tokens.size() >= 3 && tokens[0].size() == 2 && tokens[0][0] == 'P' &&
             tokens[0][1] >= '1' && tokens[0][1] <= '6') {
    if (!number(tokens[1], &width) || !number(tokens[2], &height)) width = height = -1;
  }
  return CheckFrameSize(width, height, max_frame_side);
}

absl::Status CheckWholeInput(absl::string_view bytes, int max_frame_side,
                             int64_t max_fragment_samples) {
  if (bytes.empty()) return absl::InvalidArgumentError("empty input: no video bytes were sent");
  if (auto status = CheckRawHeaderFrameSize(bytes.substr(0, kRawHeaderBytes), max_frame_side);
      !status.ok()) {
    return status;
  }
  return FragmentGuard(max_fragment_samples).Inspect(bytes);
}

UriInputChecks RawInputChecks(int max_frame_side, int64_t max_fragment_samples) {
  UriInputChecks checks;
  checks.head_bytes = kRawHeaderBytes;
  checks.check_head = [max_frame_side](absl::string_view head) {
    return CheckRawHeaderFrameSize(head, max_frame_side);
  };
  checks.max_fragment_samples = max_fragment_samples;
  return checks;
}

absl::StatusOr<VideoStream> FindVideoStream(AVFormatContext* format, int max_frame_side) {
  // The demuxer reads dimensions from the header; refuse oversized frames before any decoder
  // allocates a picture buffer for them.
  for (unsigned i = 0; i < format->nb_streams; ++i) {
    const AVCodecParameters* par = format->streams[i]->codecpar;
    if (par->codec_type == AVMEDIA_TYPE_VIDEO) {
      if (auto status = CheckFrameSize(par->width, par->height, max_frame_side); !status.ok()) {
        return status;
      }
    }
  }
  // Stream probing decodes a few frames; cap the picture size its decoders accept.
  std::vector<AVDictionary*> probe_options(format->nb_streams, nullptr);
  const std::string max_pixels =
      std::to_string(static_cast<int64_t>(max_frame_side) * max_frame_side);
  for (auto& dict : probe_options) av_dict_set(&dict, "max_pixels", max_pixels.c_str(), 0);
  // Probing may read this much media to fill in the streams' parameters. FFmpeg's default, 5 s,
  // is 5 s of waiting before the first frame of a live feed (MPEG-TS from a camera reads all of
  // it); 1 s finds every stream of the decode matrix's containers.
  if (format->max_analyze_duration == 0) format->max_analyze_duration = AV_TIME_BASE;
  const int probed = avformat_find_stream_info(format, probe_options.data());
  for (auto& dict : probe_options) av_dict_free(&dict);
  if (probed < 0) {
    return AvError(absl::StatusCode::kInvalidArgument, "cannot read the video's streams", probed);
  }

  VideoStream stream;
  stream.index = av_find_best_stream(format, AVMEDIA_TYPE_VIDEO, -1, -1, &stream.codec, 0);
  if (stream.index == AVERROR_STREAM_NOT_FOUND) {
    return absl::InvalidArgumentError(
        absl::StrCat("no video stream in input (", DescribeInput(*format), ")"));
  }
  if (stream.index == AVERROR_DECODER_NOT_FOUND) {
    const int any = av_find_best_stream(format, AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
    const char* name = avcodec_get_name(format->streams[any]->codecpar->codec_id);
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported video codec: ", name, " (", DescribeInput(*format), ")"));
  }
  if (stream.index < 0) {
    return AvError(absl::StatusCode::kInvalidArgument, "cannot select a video stream",
                   stream.index);
  }
  const AVCodecParameters* par = format->streams[stream.index]->codecpar;
  if (auto status = CheckFrameSize(par->width, par->height, max_frame_side); !status.ok()) {
    return status;
  }
  return stream;
}

double ClockwiseRotation(const AVStream& stream) {
#if LIBAVCODEC_VERSION_INT >= AV_VERSION_INT(60, 29, 100)  // FFmpeg 6.1 moved it to codecpar
  const AVPacketSideData* side =
      av_packet_side_data_get(stream.codecpar->coded_side_data, stream.codecpar->nb_coded_side_data,
                              AV_PKT_DATA_DISPLAYMATRIX);
  const uint8_t* matrix = side != nullptr && side->size >= 36 ? side->data : nullptr;
#else
  size_t size = 0;
  const uint8_t* matrix = av_stream_get_side_data(&stream, AV_PKT_DATA_DISPLAYMATRIX, &size);
  if (size < 36) matrix = nullptr;
#endif
  if (matrix == nullptr) return 0;
  // av_display_rotation_get gives the counter-clockwise angle the matrix applies.
  const double counter_clockwise =
      av_display_rotation_get(reinterpret_cast<const int32_t*>(matrix));
  return std::isnan(counter_clockwise) ? 0 : -counter_clockwise;
}

VideoDecoder::~VideoDecoder() {
  if (!nvdec.active()) return;
  const NvdecDevice* device = nvdec.device();
  device->Close(std::move(context), std::move(nvdec));
}

absl::StatusOr<VideoDecoder> OpenVideoDecoder(const AVStream& stream, const AVCodec* codec,
                                              int threads, int max_frame_side,
                                              const NvdecDevice* nvdec) {
  VideoDecoder decoder;
  decoder.context.reset(avcodec_alloc_context3(codec));
  AVCodecContext* context = decoder.get();
  if (context == nullptr) return absl::ResourceExhaustedError("out of memory for the decoder");
  int result = avcodec_parameters_to_context(context, stream.codecpar);
  if (result < 0) {
    return AvError(absl::StatusCode::kInvalidArgument, "bad video stream parameters", result);
  }
  context->thread_count = threads;
  context->thread_type = FF_THREAD_FRAME | FF_THREAD_SLICE;
  context->max_pixels = static_cast<int64_t>(max_frame_side) * max_frame_side;
  context->pkt_timebase = stream.time_base;
  if (nvdec != nullptr) decoder.nvdec = nvdec->Attach(*context, *codec);
  result = avcodec_open2(context, codec, nullptr);
  if (result < 0) {
    return AvError(absl::StatusCode::kInvalidArgument,
                   absl::StrCat("cannot open the ", codec->name, " decoder"), result);
  }
  return decoder;
}

}  // namespace vidclf::media
