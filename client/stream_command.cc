#include "client/stream_command.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <iostream>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "client/inference_messages.h"
#include "client/signal_watcher.h"
#include "common/cancellation.h"
#include "inference/grpc_service.grpc.pb.h"
#include "media/feed_remuxer.h"
#include "media/uri_redaction.h"
#include "vidclf/v1/video_classifier.grpc.pb.h"

namespace vidclf::client {
namespace {

using vidclf::v1::StreamClassifyRequest;
using vidclf::v1::StreamPrediction;

// A feed's call: one thread writes, waiting for each message to go out, while gRPC's threads hand
// each response to `on_response` as it arrives. The writer holds the call open (a hold) until
// CloseWrites, so that the call cannot end under a write that is being started.
template <typename Request, typename Response>
class FeedCall final : public grpc::ClientBidiReactor<Request, Response> {
 public:
  // Starts the RPC on the reactor, as the stub's async() does.
  using Starter =
      std::function<void(grpc::ClientContext*, grpc::ClientBidiReactor<Request, Response>*)>;

  FeedCall(const Starter& start, grpc::ClientContext* context,
           std::function<void(const Response&)> on_response)
      : on_response_(std::move(on_response)) {
    start(context, this);
    this->StartRead(&response_);
    this->AddHold();
    this->StartCall();
  }

  // Sends `message` and waits until it has gone out; false once the call is over.
  bool Write(const Request& message) {
    {
      absl::MutexLock lock(&mutex_);
      if (reads_over_) return false;  // the server has finished the call
      writing_ = true;
    }
    this->StartWrite(&message);  // outside the lock, which OnWriteDone takes
    absl::MutexLock lock(&mutex_);
    mutex_.Await(absl::Condition(
        +[](bool* writing) { return !*writing; }, &writing_));
    return write_ok_;
  }

  // The writer is done: after the whole feed (`writes_done`: the server then answers what is
  // left and finishes), or after the call failed or was cancelled.
  void CloseWrites(bool writes_done) {
    if (writes_done) this->StartWritesDone();
    this->RemoveHold();
  }

  // Waits for the end of the call; CloseWrites must have been called.
  grpc::Status Await() {
    absl::MutexLock lock(&mutex_);
    mutex_.Await(absl::Condition(&done_));
    return status_;
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      absl::MutexLock lock(&mutex_);
      reads_over_ = true;
      return;
    }
    on_response_(response_);
    this->StartRead(&response_);
  }
  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mutex_);
    write_ok_ = ok;
    writing_ = false;
  }
  void OnDone(const grpc::Status& status) override {
    absl::MutexLock lock(&mutex_);
    status_ = status;
    done_ = true;
  }

 private:
  std::function<void(const Response&)> on_response_;
  Response response_;  // read into by gRPC, one read at a time
  absl::Mutex mutex_;
  bool reads_over_ ABSL_GUARDED_BY(mutex_) = false;
  bool writing_ ABSL_GUARDED_BY(mutex_) = false;
  bool write_ok_ ABSL_GUARDED_BY(mutex_) = false;
  bool done_ ABSL_GUARDED_BY(mutex_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mutex_);
};

// A feed as one protocol carries it: its chunks, its end, and the predictions that come back.
class Feed {
 public:
  virtual ~Feed() = default;
  // Sends the feed's next chunk (the first one opens the feed); false once the call is over.
  virtual bool Send(absl::string_view chunk) = 0;
  // As FeedCall's; with `writes_done`, the feed ended.
  virtual void Close(bool writes_done) = 0;
  virtual grpc::Status Await() = 0;
};

// vidclf.v1's StreamClassify: a StreamConfig, then the chunks.
class ClassifierFeed final : public Feed {
 public:
  ClassifierFeed(vidclf::v1::VideoClassifier::Stub& stub, grpc::ClientContext* context,
                 const FollowOptions& follow,
                 std::function<void(const StreamPrediction&)> on_prediction)
      : call_([&stub](grpc::ClientContext* c,
                      auto* reactor) { stub.async()->StreamClassify(c, reactor); },
              context, std::move(on_prediction)) {
    *config_.mutable_config() = StreamConfigFrom(follow);
    config_.mutable_config()->set_input(vidclf::v1::StreamConfig::CONTAINER);
  }

  bool Send(absl::string_view chunk) override {
    if (!opened_) {
      opened_ = true;
      if (!call_.Write(config_)) return false;
    }
    message_.set_chunk(chunk.data(), chunk.size());
    return call_.Write(message_);
  }
  void Close(bool writes_done) override { call_.CloseWrites(writes_done); }
  grpc::Status Await() override { return call_.Await(); }

 private:
  FeedCall<StreamClassifyRequest, StreamPrediction> call_;
  StreamClassifyRequest config_;
  StreamClassifyRequest message_;
  bool opened_ = false;
};

// The Open Inference Protocol's ModelStreamInfer: the feed as sequence 1 of the call, its head
// options on the request that starts it, its end a request of its own.
class InferenceFeed final : public Feed {
 public:
  InferenceFeed(inference::GRPCInferenceService::Stub& stub, grpc::ClientContext* context,
                const FollowOptions& follow,
                std::function<void(const StreamPrediction&)> on_prediction)
      : on_prediction_(std::move(on_prediction)),
        follow_(follow),
        call_([&stub](grpc::ClientContext* c,
                      auto* reactor) { stub.async()->ModelStreamInfer(c, reactor); },
              context,
              [this](const inference::ModelStreamInferResponse& response) { Answered(response); }) {
  }

  bool Send(absl::string_view chunk) override {
    inference::ModelInferRequest request = SequenceRequest();
    if (!started_) {
      started_ = true;
      AddSequenceStart(StreamConfigFrom(follow_), &request);
    }
    inference::ModelInferRequest::InferInputTensor* input = request.add_inputs();
    input->set_name("VIDEO");
    input->set_datatype("BYTES");
    input->add_shape(1);
    request.add_raw_input_contents(OneBytesElement(chunk));
    return call_.Write(request);
  }

  void Close(bool writes_done) override {
    if (writes_done && started_) {
      inference::ModelInferRequest end = SequenceRequest();
      Parameter(&end, "sequence_end").set_bool_param(true);
      writes_done = call_.Write(end);
    }
    call_.CloseWrites(writes_done);
  }

  // The call's status, or the sequence's error when the call itself ended OK.
  grpc::Status Await() override {
    const grpc::Status status = call_.Await();
    absl::MutexLock lock(&mutex_);
    return status.ok() ? error_ : status;
  }

 private:
  inference::ModelInferRequest SequenceRequest() const {
    inference::ModelInferRequest request;
    request.set_model_name(follow_.model);
    Parameter(&request, "sequence_id").set_int64_param(1);
    return request;
  }

  void Answered(const inference::ModelStreamInferResponse& response) {
    if (!response.error_message().empty()) {
      absl::MutexLock lock(&mutex_);
      if (error_.ok()) error_ = StatusOfStreamError(response.error_message());
      return;
    }
    const auto& parameters = response.infer_response().parameters();
    if (parameters.count("sequence_end") > 0) return;
    on_prediction_(StreamPredictionOf(response.infer_response()));
  }

  std::function<void(const StreamPrediction&)> on_prediction_;
  const FollowOptions& follow_;
  bool started_ = false;
  absl::Mutex mutex_;
  grpc::Status error_ ABSL_GUARDED_BY(mutex_);
  // Last: it starts the call, whose answers use the members above.
  FeedCall<inference::ModelInferRequest, inference::ModelStreamInferResponse> call_;
};

// The remuxer's options from the command's; INVALID_ARGUMENT for a malformed KEY=VALUE.
absl::Status RemuxerOptionsFrom(const StreamOptions& options, media::FeedRemuxerOptions* remuxer) {
  remuxer->realtime = options.realtime;
  remuxer->chunk_bytes = std::max(1, options.chunk_kib) << 10;
  remuxer->input_format = options.input_format;
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> pairs =
      ParseKeyValues(options.input_options, "--input-option");
  if (!pairs.ok()) return pairs.status();
  remuxer->input_options = *std::move(pairs);
  return absl::OkStatus();
}

}  // namespace

void AddStreamOptions(CLI::App* command, StreamOptions* options) {
  AddFollowOptions(command, &options->follow);
  command->add_flag("--realtime", options->realtime,
                    "Send a file no faster than it plays, as a camera would.");
  command->add_option("--input-format", options->input_format,
                      "The source's format or device, as ffmpeg -f takes it (v4l2, rawvideo, "
                      "mjpeg; default: guessed).");
  command
      ->add_option("--input-option", options->input_options,
                   "KEY=VALUE for the source's demuxer, device or protocol, as ffmpeg takes "
                   "them before -i (video_size=640x480, input_format=mjpeg, "
                   "rtsp_transport=tcp); repeatable.")
      ->allow_extra_args(false);  // one KEY=VALUE each, so that SOURCE may follow
  // gRPC servers refuse messages over 4 MiB unless told otherwise.
  command->add_option("--chunk-kib", options->chunk_kib, "Largest message of the feed, in KiB.")
      ->capture_default_str()
      ->check(CLI::Range(1, 4000));
}

int RunStream(const std::string& source, const StreamOptions& options) {
  if (options.protocol == "v2" && (options.follow.segment_events || options.follow.events_only)) {
    return FailBeforeCalling(absl::InvalidArgumentError(
        "--segment-events is vidclf.v1's: leave out --protocol v2 to have them"));
  }
  media::FeedRemuxerOptions remuxer_options;
  if (auto status = RemuxerOptionsFrom(options, &remuxer_options); !status.ok()) {
    return FailBeforeCalling(status);
  }
  CancellationToken cancellation;
  remuxer_options.cancellation = &cancellation;
  const FollowOptions& follow = options.follow;
  grpc::ClientContext context;
  if (follow.connection.timeout_seconds > 0) SetDeadline(context, follow.connection);
  SignalWatcher signals([&] {
    std::cerr << "vidclf: interrupted; cancelling the stream\n";
    cancellation.Cancel(absl::CancelledError("interrupted"));
    context.TryCancel();
  });
  const auto start = std::chrono::steady_clock::now();

  // Opened before the call, so that a source that cannot be read costs the server nothing.
  absl::StatusOr<std::unique_ptr<media::FeedRemuxer>> remuxer =
      media::FeedRemuxer::Open(source, remuxer_options);
  if (!remuxer.ok()) {
    if (signals.signalled()) return kInterruptedExit;
    return FailWith(remuxer.status());
  }
  std::cerr << absl::StrFormat("vidclf: streaming %s (%s, %dx%d) as Matroska to %s\n",
                               media::RedactUri(source), (*remuxer)->codec_name(),
                               (*remuxer)->width(), (*remuxer)->height(), follow.connection.server);

  absl::Mutex tally_mutex;
  PredictionTally tally;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = Connect(follow.connection);
  if (!channel.ok()) return FailBeforeCalling(channel.status());
  auto on_prediction = [&](const StreamPrediction& prediction) {
    absl::MutexLock lock(&tally_mutex);
    tally.Count(prediction);
    PrintPrediction(prediction, follow);
  };
  auto classifier = vidclf::v1::VideoClassifier::NewStub(*channel);
  auto inference = inference::GRPCInferenceService::NewStub(*channel);
  std::unique_ptr<Feed> feed;
  if (options.protocol == "v2") {
    feed = std::make_unique<InferenceFeed>(*inference, &context, follow, on_prediction);
  } else {
    feed = std::make_unique<ClassifierFeed>(*classifier, &context, follow, on_prediction);
  }

  bool call_over = false;
  int64_t bytes_sent = 0;
  const absl::Status feed_status = (*remuxer)->Run([&](absl::string_view bytes) {
    if (!feed->Send(bytes)) {
      call_over = true;
      return absl::CancelledError("the call is over");
    }
    bytes_sent += static_cast<int64_t>(bytes.size());
    return absl::OkStatus();
  });
  // A source that breaks off ends the feed like one that ends: the server answers what it has.
  const bool source_failed = !feed_status.ok() && !call_over && !cancellation.cancelled();
  feed->Close(/*writes_done=*/!call_over && !cancellation.cancelled());
  const grpc::Status status = feed->Await();

  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  {
    absl::MutexLock lock(&tally_mutex);
    // On stderr with --json, so that stdout holds only predictions.
    (follow.json ? std::cerr : std::cout) << absl::StrFormat(
        "%d predictions; %d frames seen, %d embedded; %d dropped; %.2f MiB sent in %.1f s\n",
        tally.predictions, tally.frames_seen, tally.frames_embedded, tally.dropped,
        static_cast<double>(bytes_sent) / (1 << 20), seconds);
  }
  if (signals.signalled()) return kInterruptedExit;
  if (source_failed) return FailWith(feed_status);
  if (!status.ok()) return Fail(status, follow.connection);
  return 0;
}

}  // namespace vidclf::client
