#include "client/classify_command.h"

#include <fcntl.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "client/classify_client.h"
#include "vidclf/v1/video_classifier.grpc.pb.h"

namespace vidclf::client {
namespace {

void PrintTable(const vidclf::v1::ClassifyResponse& response) {
  std::cout << absl::StrFormat("model   %s (version %s)\n", response.model(),
                               response.model_version());
  const auto& times = response.frame_timestamps_seconds();
  std::cout << absl::StrFormat("frames  %d", response.frames_used());
  if (!times.empty()) {
    std::cout << absl::StrFormat(", %.2f s to %.2f s", times[0], times[times.size() - 1]);
  }
  std::cout << "\n\n" << absl::StrFormat("%-4s  %-24s  %s\n", "rank", "label", "score");
  for (int i = 0; i < response.top_k_size(); ++i) {
    std::cout << absl::StrFormat("%-4d  %-24s  %.4f\n", i + 1, response.top_k(i).label(),
                                 response.top_k(i).score());
  }
  const auto& t = response.timings();
  std::cout << absl::StrFormat(
      "\ntimings (ms): decode %.1f, preprocess %.1f, embed %.1f, head %.1f, total %.1f\n",
      t.decode_ms(), t.preprocess_ms(), t.embed_ms(), t.head_ms(), t.total_ms());
}

int PrintResponse(const vidclf::v1::ClassifyResponse& response, bool json) {
  if (json) {
    google::protobuf::util::JsonPrintOptions options;
    options.preserve_proto_field_names = true;
    options.always_print_primitive_fields = true;
    std::string json;
    google::protobuf::util::MessageToJsonString(response, &json, options);
    std::cout << json << "\n";
  } else {
    PrintTable(response);
  }
  return 0;
}

// A ClassifyUpload call, written to from one thread. Unlike the synchronous writer, whose writes
// go on succeeding for seconds after the server has answered, it tells at once that the call is
// over, so an upload from a live feed stops as soon as the answer comes.
class UploadCall final : public grpc::ClientWriteReactor<vidclf::v1::ClassifyUploadRequest> {
 public:
  UploadCall(vidclf::v1::VideoClassifier::Stub& stub, grpc::ClientContext* context) {
    stub.async()->ClassifyUpload(context, &response_, this);
    StartCall();
  }

  // Sends `message` and waits until it has gone out; false once the call is over.
  bool Write(const vidclf::v1::ClassifyUploadRequest& message) {
    {
      absl::MutexLock lock(&mutex_);
      if (done_) return false;
      writing_ = true;
    }
    StartWrite(&message);  // outside the lock, which OnWriteDone takes
    absl::MutexLock lock(&mutex_);
    mutex_.Await(absl::Condition(
        +[](bool* writing) { return !*writing; }, &writing_));
    return write_ok_;
  }
  // The upload is complete.
  void WritesDone() { StartWritesDone(); }
  bool done() {
    absl::MutexLock lock(&mutex_);
    return done_;
  }
  // Waits for the server's answer.
  grpc::Status Await(vidclf::v1::ClassifyResponse* response) {
    absl::MutexLock lock(&mutex_);
    mutex_.Await(absl::Condition(&done_));
    *response = response_;
    return status_;
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
  absl::Mutex mutex_;
  vidclf::v1::ClassifyResponse response_;
  bool writing_ ABSL_GUARDED_BY(mutex_) = false;
  bool write_ok_ ABSL_GUARDED_BY(mutex_) = false;
  bool done_ ABSL_GUARDED_BY(mutex_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mutex_);
};

// Reads what the file descriptor has, up to `size` bytes: a pipe gives what has come so far, so
// a live feed is sent as it is recorded. While waiting for input it checks every 50 ms whether
// `call` is over. 0 at the end, -1 on an error (errno says which), -2 when the call is over.
ssize_t ReadSome(int fd, char* buffer, size_t size, UploadCall& call) {
  while (true) {
    pollfd ready = {fd, POLLIN, 0};
    const int polled = poll(&ready, 1, /*timeout_ms=*/50);
    if (call.done()) return -2;
    if (polled < 0 && errno != EINTR) return -1;
    if (polled <= 0) continue;
    const ssize_t count = read(fd, buffer, size);
    if (count >= 0 || errno != EINTR) return count;
  }
}

}  // namespace

void AddClassifyOptions(CLI::App* command, ClassifyOptions* options) {
  AddConnectionOptions(command, &options->connection);
  command->add_option("--model", options->model, "Model to use (default: the server's default).");
  command->add_option("--top-k", options->top_k, "Number of ranked labels to show.")
      ->capture_default_str();
  command->add_option("--num-frames", options->num_frames,
                      "Frames to sample (default: the model's).");
  command->add_option("--sampling", options->sampling, "uniform (default), fps, window or all.")
      ->check(CLI::IsMember({"uniform", "fps", "window", "all"}));
  command->add_option("--fps", options->fps, "Frames per second, for --sampling fps.");
  command->add_option("--stride-frames", options->stride_frames,
                      "Distance between frames, for --sampling window.");
  command->add_option("--start-seconds", options->start_seconds,
                      "Start of the window, for --sampling window.");
  command->add_flag("--snap-to-keyframes", options->snap_to_keyframes,
                    "Fast decoding, for uniform sampling: take the keyframe nearest each "
                    "segment's centre when the segment holds one.");
  command->add_flag("--skip-loop-filter", options->skip_loop_filter,
                    "Fast decoding: skip the decoder's deblocking filter (blockier frames).");
  command->add_option("--attention", options->attention,
                      "Attention to run a transformer model with instead of its own, if its "
                      "bundle allows.");
  command->add_flag("--json", options->json, "Print one JSON object instead of a table.");
}

bool ReadVideo(const std::string& path, std::string* bytes) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    std::cerr << "vidclf: cannot read " << path << "\n";
    return false;
  }
  std::ostringstream contents;
  contents << file.rdbuf();
  *bytes = contents.str();
  return true;
}

vidclf::v1::ClassifyRequest SettingsFrom(const ClassifyOptions& options) {
  vidclf::v1::ClassifyRequest request;
  request.set_model(options.model);
  request.set_top_k(static_cast<uint32_t>(std::max(0, options.top_k)));
  vidclf::v1::SamplingOptions* sampling = request.mutable_sampling();
  sampling->set_strategy(options.sampling);
  sampling->set_num_frames(static_cast<uint32_t>(std::max(0, options.num_frames)));
  sampling->set_frames_per_second(options.fps);
  sampling->set_stride_frames(static_cast<uint32_t>(std::max(0, options.stride_frames)));
  sampling->set_start_seconds(options.start_seconds);
  sampling->set_snap_to_keyframes(options.snap_to_keyframes);
  sampling->set_skip_loop_filter(options.skip_loop_filter);
  request.set_attention(options.attention);
  return request;
}

int RunClassify(const std::string& path, const ClassifyOptions& options) {
  vidclf::v1::ClassifyRequest request = SettingsFrom(options);
  if (absl::StrContains(path, "://")) {
    request.set_uri(path);
  } else {
    if (!ReadVideo(path, request.mutable_video())) return 1;
  }
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = Connect(options.connection);
  if (!channel.ok()) return FailBeforeCalling(channel.status());
  const ClassifyClient client(*channel, options.protocol);
  grpc::ClientContext context;
  SetDeadline(context, options.connection);
  vidclf::v1::ClassifyResponse response;
  const grpc::Status status =
      client.Classify(&context, client.Prepare(std::move(request)), &response);
  if (!status.ok()) return Fail(status, options.connection);
  return PrintResponse(response, options.json);
}

// Sends the settings, then the input's chunks as they are read, until the input ends or the
// server answers (a sampling with a frame count can be settled before the end).
int RunUpload(const std::string& path, const ClassifyOptions& options) {
  const int fd = path == "-" ? STDIN_FILENO : open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    std::cerr << "vidclf: cannot read " << path << ": " << std::strerror(errno) << "\n";
    return 1;
  }
  const absl::Cleanup close_file = [fd] {
    if (fd != STDIN_FILENO) close(fd);
  };
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = Connect(options.connection);
  if (!channel.ok()) return FailBeforeCalling(channel.status());
  auto stub = vidclf::v1::VideoClassifier::NewStub(*channel);
  grpc::ClientContext context;
  SetDeadline(context, options.connection);
  UploadCall call(*stub, &context);
  vidclf::v1::ClassifyUploadRequest message;
  *message.mutable_settings() = SettingsFrom(options);
  std::string chunk(static_cast<size_t>(std::max(1, options.chunk_kib)) << 10, '\0');
  while (true) {
    const ssize_t count = ReadSome(fd, chunk.data(), chunk.size(), call);
    if (count == -2) break;  // the server has answered
    if (count < 0) {
      const int error = errno;
      context.TryCancel();
      vidclf::v1::ClassifyResponse ignored;
      call.Await(&ignored);
      std::cerr << "vidclf: reading " << path << " failed: " << std::strerror(error) << "\n";
      return 1;
    }
    message.set_chunk(chunk.data(), static_cast<size_t>(count));
    if (!call.Write(message)) break;  // the server has answered
    message.clear_settings();
    if (count == 0) {
      call.WritesDone();
      break;
    }
  }
  vidclf::v1::ClassifyResponse response;
  const grpc::Status status = call.Await(&response);
  if (!status.ok()) return Fail(status, options.connection);
  return PrintResponse(response, options.json);
}

}  // namespace vidclf::client
