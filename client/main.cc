// vidclf: the command-line client of vidclf-server.
//
//   vidclf classify FILE|URI [--server ADDR] [--model NAME] [--top-k K] [--num-frames N]
//                        [--sampling uniform|fps|window|all] [--fps R] [--stride-frames S]
//                        [--start-seconds T] [--attention TYPE] [--json]
//   vidclf upload FILE|- [the same options] [--chunk-kib K]
//   vidclf health [--server ADDR]
//
// A URI (anything with "://") is sent for the server to pull, within the server's --allow-uri.
// `upload` streams the file (or standard input, "-") in chunks as it reads them, so the server
// decodes while the video arrives: `ffmpeg -i CAMERA -f mpegts - | vidclf upload - --sampling
// window --num-frames 16` classifies 16 frames of a live feed.
#include <fcntl.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "common/command_line.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "vidclf/v1/video_classifier.grpc.pb.h"

ABSL_FLAG(std::string, server, "localhost:50051", "Server address, host:port.");
ABSL_FLAG(std::string, model, "", "Model to use (default: the server's default model).");
ABSL_FLAG(int, top_k, 5, "Number of ranked labels to show.");
ABSL_FLAG(int, num_frames, 0, "Frames to sample (default: the model's).");
ABSL_FLAG(std::string, sampling, "", "uniform (default), fps, window or all.");
ABSL_FLAG(double, fps, 0, "Frames per second, for --sampling fps.");
ABSL_FLAG(int, stride_frames, 0, "Distance between frames, for --sampling window.");
ABSL_FLAG(double, start_seconds, 0, "Start of the window, for --sampling window.");
ABSL_FLAG(std::string, attention, "",
          "Attention to run a transformer model with instead of its own, if its bundle allows.");
ABSL_FLAG(bool, json, false, "Print one JSON object instead of a table.");
ABSL_FLAG(double, timeout_seconds, 60, "Deadline of the call.");
ABSL_FLAG(int, chunk_kib, 256, "Largest chunk `upload` sends, in KiB; a pipe sends what has come.");

namespace {

constexpr char kUsage[] =
    "vidclf classify FILE|URI [--server ADDR] [--model NAME] [--top-k K] [--num-frames N]\n"
    "                     [--sampling uniform|fps|window|all] [--fps R] [--stride-frames S]\n"
    "                     [--start-seconds T] [--attention TYPE] [--json]\n"
    "vidclf upload FILE|- [the options of classify] [--chunk-kib K]\n"
    "vidclf health [--server ADDR]";

// Upload limit of the client's channel; the server enforces its own.
constexpr int kMaxMessageBytes = 1 << 30;

std::shared_ptr<grpc::Channel> Connect() {
  grpc::ChannelArguments arguments;
  arguments.SetMaxSendMessageSize(kMaxMessageBytes);
  return grpc::CreateCustomChannel(absl::GetFlag(FLAGS_server), grpc::InsecureChannelCredentials(),
                                   arguments);
}

void SetDeadline(grpc::ClientContext& context) {
  context.set_deadline(
      std::chrono::system_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(1e3 * absl::GetFlag(FLAGS_timeout_seconds))));
}

int Fail(const grpc::Status& status) {
  std::cerr << "vidclf: "
            << absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())) << ": "
            << (status.error_code() == grpc::StatusCode::UNAVAILABLE
                    ? "server unavailable at " + absl::GetFlag(FLAGS_server) + ": "
                    : "")
            << status.error_message() << "\n";
  return 1;
}

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

// The request's settings from the flags; the caller sets the source.
vidclf::v1::ClassifyRequest SettingsFromFlags() {
  vidclf::v1::ClassifyRequest request;
  request.set_model(absl::GetFlag(FLAGS_model));
  request.set_top_k(static_cast<uint32_t>(std::max(0, absl::GetFlag(FLAGS_top_k))));
  vidclf::v1::SamplingOptions* sampling = request.mutable_sampling();
  sampling->set_strategy(absl::GetFlag(FLAGS_sampling));
  sampling->set_num_frames(static_cast<uint32_t>(std::max(0, absl::GetFlag(FLAGS_num_frames))));
  sampling->set_frames_per_second(absl::GetFlag(FLAGS_fps));
  sampling->set_stride_frames(
      static_cast<uint32_t>(std::max(0, absl::GetFlag(FLAGS_stride_frames))));
  sampling->set_start_seconds(absl::GetFlag(FLAGS_start_seconds));
  request.set_attention(absl::GetFlag(FLAGS_attention));
  return request;
}

int PrintResponse(const vidclf::v1::ClassifyResponse& response) {
  if (absl::GetFlag(FLAGS_json)) {
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

int Classify(const std::string& path) {
  vidclf::v1::ClassifyRequest request = SettingsFromFlags();
  if (absl::StrContains(path, "://")) {
    request.set_uri(path);
  } else {
    std::ifstream file(path, std::ios::binary);
    if (!file) {
      std::cerr << "vidclf: cannot read " << path << "\n";
      return 1;
    }
    std::ostringstream bytes;
    bytes << file.rdbuf();
    request.set_video(bytes.str());
  }
  auto stub = vidclf::v1::VideoClassifier::NewStub(Connect());
  grpc::ClientContext context;
  SetDeadline(context);
  vidclf::v1::ClassifyResponse response;
  const grpc::Status status = stub->Classify(&context, request, &response);
  if (!status.ok()) return Fail(status);
  return PrintResponse(response);
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

// Sends the settings, then the input's chunks as they are read, until the input ends or the
// server answers (a sampling with a frame count can be settled before the end).
int Upload(const std::string& path) {
  const int fd = path == "-" ? STDIN_FILENO : open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    std::cerr << "vidclf: cannot read " << path << ": " << std::strerror(errno) << "\n";
    return 1;
  }
  const absl::Cleanup close_file = [fd] {
    if (fd != STDIN_FILENO) close(fd);
  };
  auto stub = vidclf::v1::VideoClassifier::NewStub(Connect());
  grpc::ClientContext context;
  SetDeadline(context);
  UploadCall call(*stub, &context);
  vidclf::v1::ClassifyUploadRequest message;
  *message.mutable_settings() = SettingsFromFlags();
  std::string chunk(static_cast<size_t>(std::max(1, absl::GetFlag(FLAGS_chunk_kib))) << 10, '\0');
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
  if (!status.ok()) return Fail(status);
  return PrintResponse(response);
}

int Health() {
  auto stub = grpc::health::v1::Health::NewStub(Connect());
  grpc::ClientContext context;
  SetDeadline(context);
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) return Fail(status);
  std::cout << grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status()) << "\n";
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args = vidclf::ParseCommandLine(argc, argv, kUsage);
  if (args.size() == 3 && args[1] == "classify") return Classify(args[2]);
  if (args.size() == 3 && args[1] == "upload") return Upload(args[2]);
  if (args.size() == 2 && args[1] == "health") return Health();
  std::cerr << "usage:\n" << kUsage << "\n";
  return 2;
}
