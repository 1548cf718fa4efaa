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
#include "client/signal_watcher.h"
#include "common/cancellation.h"
#include "media/feed_remuxer.h"
#include "vidclf/v1/video_classifier.grpc.pb.h"

namespace vidclf::client {
namespace {

using vidclf::v1::StreamClassifyRequest;
using vidclf::v1::StreamPrediction;

// A StreamClassify call: one thread writes the feed, waiting for each message to go out, while
// gRPC's threads hand each prediction to `on_prediction` as it arrives. The writer holds the
// call open (a hold) until CloseWrites, so that the call cannot end under a write that is being
// started.
class StreamCall final : public grpc::ClientBidiReactor<StreamClassifyRequest, StreamPrediction> {
 public:
  using PredictionHandler = std::function<void(const StreamPrediction&)>;

  StreamCall(vidclf::v1::VideoClassifier::Stub& stub, grpc::ClientContext* context,
             PredictionHandler on_prediction)
      : on_prediction_(std::move(on_prediction)) {
    stub.async()->StreamClassify(context, this);
    StartRead(&prediction_);
    AddHold();
    StartCall();
  }

  // Sends `message` and waits until it has gone out; false once the call is over.
  bool Write(const StreamClassifyRequest& message) {
    {
      absl::MutexLock lock(&mutex_);
      if (reads_over_) return false;  // the server has finished the call
      writing_ = true;
    }
    StartWrite(&message);  // outside the lock, which OnWriteDone takes
    absl::MutexLock lock(&mutex_);
    mutex_.Await(absl::Condition(
        +[](bool* writing) { return !*writing; }, &writing_));
    return write_ok_;
  }

  // The writer is done: after the whole feed (`writes_done`: the server then answers what is
  // left and finishes), or after the call failed or was cancelled.
  void CloseWrites(bool writes_done) {
    if (writes_done) StartWritesDone();
    RemoveHold();
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
    on_prediction_(prediction_);
    StartRead(&prediction_);
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
  PredictionHandler on_prediction_;
  StreamPrediction prediction_;  // read into by gRPC, one read at a time
  absl::Mutex mutex_;
  bool reads_over_ ABSL_GUARDED_BY(mutex_) = false;
  bool writing_ ABSL_GUARDED_BY(mutex_) = false;
  bool write_ok_ ABSL_GUARDED_BY(mutex_) = false;
  bool done_ ABSL_GUARDED_BY(mutex_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mutex_);
};

// What the predictions said, for the summary line.
struct Tally {
  absl::Mutex mutex;
  int64_t predictions ABSL_GUARDED_BY(mutex) = 0;
  uint64_t frames_seen ABSL_GUARDED_BY(mutex) = 0;
  uint64_t frames_embedded ABSL_GUARDED_BY(mutex) = 0;
  int64_t dropped ABSL_GUARDED_BY(mutex) = 0;
};

// The remuxer's options from the command's; false, with a message, for a malformed KEY=VALUE.
bool RemuxerOptionsFrom(const StreamOptions& options, media::FeedRemuxerOptions* remuxer) {
  remuxer->realtime = options.realtime;
  remuxer->chunk_bytes = std::max(1, options.chunk_kib) << 10;
  remuxer->input_format = options.input_format;
  for (const std::string& option : options.input_options) {
    const size_t equals = option.find('=');
    if (equals == std::string::npos || equals == 0) {
      std::cerr << "vidclf: --input-option takes KEY=VALUE, not '" << option << "'\n";
      return false;
    }
    remuxer->input_options.emplace_back(option.substr(0, equals), option.substr(equals + 1));
  }
  return true;
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
  media::FeedRemuxerOptions remuxer_options;
  if (!RemuxerOptionsFrom(options, &remuxer_options)) return 1;
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
  std::cerr << absl::StrFormat("vidclf: streaming %s (%s, %dx%d) as Matroska to %s\n", source,
                               (*remuxer)->codec_name(), (*remuxer)->width(), (*remuxer)->height(),
                               follow.connection.server);

  absl::Mutex tally_mutex;
  PredictionTally tally;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = Connect(follow.connection);
  if (!channel.ok()) return FailBeforeCalling(channel.status());
  auto stub = vidclf::v1::VideoClassifier::NewStub(*channel);
  StreamCall call(*stub, &context, [&](const StreamPrediction& prediction) {
    absl::MutexLock lock(&tally_mutex);
    tally.Count(prediction);
    PrintPrediction(prediction, follow.json);
  });

  StreamClassifyRequest config;
  *config.mutable_config() = StreamConfigFrom(follow);
  config.mutable_config()->set_input(vidclf::v1::StreamConfig::CONTAINER);
  bool call_over = !call.Write(config);
  int64_t bytes_sent = 0;
  absl::Status feed_status = absl::OkStatus();
  if (!call_over) {
    StreamClassifyRequest message;
    feed_status = (*remuxer)->Run([&](absl::string_view bytes) {
      message.set_chunk(bytes.data(), bytes.size());
      if (!call.Write(message)) {
        call_over = true;
        return absl::CancelledError("the call is over");
      }
      bytes_sent += static_cast<int64_t>(bytes.size());
      return absl::OkStatus();
    });
  }
  // A source that breaks off ends the feed like one that ends: the server answers what it has.
  const bool source_failed = !feed_status.ok() && !call_over && !cancellation.cancelled();
  call.CloseWrites(/*writes_done=*/!call_over && !cancellation.cancelled());
  const grpc::Status status = call.Await();

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
