#include "server/service/segments_reactor.h"

#include <utility>

#include "server/service/feed_reactor.h"
#include "server/service/stream_call.h"

namespace vidclf::service {
namespace {

using vidclf::v1::ClassifySegmentsRequest;
using vidclf::v1::ClassifySegmentsResponse;
using vidclf::v1::ClassifySegmentsUploadRequest;

// Frames sampled per second of media time when a request says nothing.
constexpr double kDefaultSampleFps = 4;

class SegmentsReactor final
    : public StreamCall<grpc::ServerWriteReactor<grpc::ByteBuffer>, ClassifySegmentsResponse> {
 public:
  SegmentsReactor(engine::ClassifyEngine* engine, ServerMetrics* metrics,
                  grpc::CallbackServerContext* context, ClassifySegmentsRequest request)
      : StreamCall("ClassifySegments", metrics, context) {
    absl::StatusOr<engine::StreamOptions> options = SegmentsOptionsFrom(request);
    if (!options.ok()) {
      FinishEarly(options.status());
      return;
    }
    switch (request.source_case()) {
      case ClassifySegmentsRequest::kVideo:
        options->input = engine::StreamOptions::Input::kBytes;
        options->video = std::move(*request.mutable_video());
        break;
      case ClassifySegmentsRequest::kUri:
        options->input = engine::StreamOptions::Input::kUri;
        options->uri = request.uri();
        options->max_reconnects = 0;  // a video, not a camera: where it stops, the call ends
        break;
      default:
        FinishEarly(absl::InvalidArgumentError(
            "ClassifySegmentsRequest needs its video: bytes in `video` or a `uri`"));
        return;
    }
    Adopt(engine->OpenStream(*std::move(options), this));
  }
};

class SegmentsUploadReactor final
    : public FeedReactor<ClassifySegmentsUploadRequest, ClassifySegmentsResponse> {
 public:
  SegmentsUploadReactor(engine::ClassifyEngine* engine, ServerMetrics* metrics,
                        grpc::CallbackServerContext* context)
      : FeedReactor("ClassifySegmentsUpload", "settings", engine, metrics, context) {}

 private:
  absl::StatusOr<engine::StreamOptions> OptionsFromFirst(
      const ClassifySegmentsUploadRequest& first) override {
    if (!first.has_settings()) {
      return absl::InvalidArgumentError(
          "ClassifySegmentsUpload's first message must carry the settings");
    }
    if (!first.chunk().empty()) {
      return absl::InvalidArgumentError(
          "ClassifySegmentsUpload's first message carries the settings alone; send the video in "
          "the messages after it");
    }
    if (first.settings().source_case() != ClassifySegmentsRequest::SOURCE_NOT_SET) {
      return absl::InvalidArgumentError(
          "ClassifySegmentsUpload's settings must leave video and uri unset: the video comes "
          "in the chunks");
    }
    absl::StatusOr<engine::StreamOptions> options = SegmentsOptionsFrom(first.settings());
    if (options.ok()) options->input = engine::StreamOptions::Input::kContainer;
    return options;
  }

  absl::Status Push(engine::StreamSession& session, ClassifySegmentsUploadRequest& request,
                    bool* room) override {
    if (request.has_settings()) {
      return absl::InvalidArgumentError(
          "ClassifySegmentsUpload takes settings in its first message only; a later one had them");
    }
    return session.PushBytes(request.chunk(), room);
  }
};

}  // namespace

absl::StatusOr<engine::StreamOptions> SegmentsOptionsFrom(const ClassifySegmentsRequest& settings) {
  engine::StreamOptions options;
  options.model = settings.model();
  options.attention = settings.attention();
  options.top_k = CappedToInt(settings.top_k());
  if (settings.has_every_nth_frame()) {
    if (settings.has_frames_per_second()) {
      return absl::InvalidArgumentError("set frames_per_second or every_nth_frame, not both");
    }
    if (settings.every_nth_frame() == 0) {
      return absl::InvalidArgumentError("every_nth_frame must be at least 1");
    }
    options.embed_stride = CappedToInt(settings.every_nth_frame());
  } else {
    options.default_sampling = !settings.has_frames_per_second();
    options.sample_fps =
        settings.has_frames_per_second() ? settings.frames_per_second() : kDefaultSampleFps;
    if (!(options.sample_fps > 0) || options.sample_fps > engine::kMaxSampleFps) {
      return absl::InvalidArgumentError(absl::StrCat("frames_per_second must be in (0, ",
                                                     engine::kMaxSampleFps, "], not ",
                                                     options.sample_fps));
    }
  }
  engine::WindowOptions windows;
  if (settings.has_window_frames()) {
    if (settings.window_frames() == 0) {
      return absl::InvalidArgumentError("window_frames must be at least 1");
    }
    windows.window_frames = CappedToInt(settings.window_frames());
  }
  if (settings.has_hop_frames()) {
    if (settings.hop_frames() == 0)
      return absl::InvalidArgumentError("hop_frames must be at least 1");
    windows.hop_frames = CappedToInt(settings.hop_frames());
  }
  options.windows = windows;
  options.segments = SegmentOptionsFrom(settings.segments());
  options.events_only = settings.segments().events_only();
  if (absl::Status status = engine::ValidateStreamOptions(options); !status.ok()) return status;
  return options;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* NewSegmentsReactor(engine::ClassifyEngine* engine,
                                                               ServerMetrics* metrics,
                                                               grpc::CallbackServerContext* context,
                                                               ClassifySegmentsRequest request) {
  return new SegmentsReactor(engine, metrics, context, std::move(request));
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* NewSegmentsUploadReactor(
    engine::ClassifyEngine* engine, ServerMetrics* metrics, grpc::CallbackServerContext* context) {
  return new SegmentsUploadReactor(engine, metrics, context);
}

}  // namespace vidclf::service
