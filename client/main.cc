// vidclf: the command-line client of vidclf-server.
//
//   vidclf classify FILE|URI [--server ADDR] [--model NAME] [--top-k K] [--num-frames N]
//                        [--sampling uniform|fps|window|all] [--fps R] [--stride-frames S]
//                        [--start-seconds T] [--attention TYPE] [--json]
//   vidclf health [--server ADDR]
//
// A URI (anything with "://") is sent for the server to pull, within the server's --allow-uri.
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
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

namespace {

constexpr char kUsage[] =
    "vidclf classify FILE|URI [--server ADDR] [--model NAME] [--top-k K] [--num-frames N]\n"
    "                     [--sampling uniform|fps|window|all] [--fps R] [--stride-frames S]\n"
    "                     [--start-seconds T] [--attention TYPE] [--json]\n"
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

int Classify(const std::string& path) {
  vidclf::v1::ClassifyRequest request;
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

  auto stub = vidclf::v1::VideoClassifier::NewStub(Connect());
  grpc::ClientContext context;
  SetDeadline(context);
  vidclf::v1::ClassifyResponse response;
  const grpc::Status status = stub->Classify(&context, request, &response);
  if (!status.ok()) return Fail(status);

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
  if (args.size() == 2 && args[1] == "health") return Health();
  std::cerr << "usage:\n" << kUsage << "\n";
  return 2;
}
