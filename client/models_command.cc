#include "client/models_command.h"

#include <google/protobuf/util/json_util.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "inference/grpc_service.grpc.pb.h"
#include "vidclf/v1/video_classifier.grpc.pb.h"

namespace vidclf::client {
namespace {

// How often `health --wait` asks again while the server is up but not yet SERVING.
constexpr absl::Duration kHealthPoll = absl::Milliseconds(200);

std::string Json(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string json;
  google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

void PrintModel(const vidclf::v1::ModelInfo& model) {
  const auto& input = model.input();
  std::cout << absl::StrFormat(
      "%s version %s%s\n  versions      %s\n  labels        %s\n  input         %d frames, "
      "shorter side %d, crop %d, %s sampling\n  head          %s %s\n",
      model.name(), model.version(), model.is_default() ? " (default)" : "",
      absl::StrJoin(model.versions(), ", "), absl::StrJoin(model.labels(), ", "),
      input.num_frames(), input.resize_shorter_side(), input.crop_size(), input.default_sampling(),
      model.head(), model.head_options_json());
  if (!model.attention().empty()) {
    std::cout << absl::StrFormat("  attention     %s, substitutions: %s\n", model.attention(),
                                 model.attention_substitutions().empty()
                                     ? "none"
                                     : absl::StrJoin(model.attention_substitutions(), ", "));
  }
  const nlohmann::json metrics = nlohmann::json::parse(model.metrics_json(), nullptr, false);
  if (metrics.is_object() && metrics.contains("accuracy")) {
    std::cout << absl::StrFormat(
        "  test metrics  accuracy %.3f, macro recall %.3f, MCC %.3f on %d clips\n",
        metrics.value("accuracy", 0.0), metrics.value("macro_recall", 0.0),
        metrics.value("mcc", 0.0), metrics.value("clips", 0));
  }
  if (model.has_segmentation()) {
    std::cout << absl::StrFormat(
        "  segments      a label per frame, %g frames per second sampled\n",
        model.segmentation().frames_per_second());
    if (metrics.is_object() && metrics.contains("frame_accuracy")) {
      std::cout << absl::StrFormat(
          "  test metrics  frame accuracy %.1f%%, edit %.1f, F1@0.50 %.1f on %d timelines\n",
          metrics.value("frame_accuracy", 0.0), metrics.value("edit", 0.0),
          metrics.value("f1@0.50", 0.0), metrics.value("videos", 0));
    }
  }
  const auto& streaming = model.streaming();
  std::cout << "  streams       "
            << (streaming.mode() == "recurrent"
                    ? std::string("recurrent step (constant cost per frame)")
                    : absl::StrFormat("sliding window of %d frames every %d",
                                      streaming.window_frames(), streaming.stride_frames()))
            << "\n";
}

// A tensor as "NAME DATATYPE [shape]".
std::string TensorText(const inference::ModelMetadataResponse::TensorMetadata& tensor) {
  return absl::StrFormat("%s %s [%s]", tensor.name(), tensor.datatype(),
                         absl::StrJoin(tensor.shape(), ","));
}

// The Open Inference Protocol's view: the repository's index, then each model's (or `name`'s)
// metadata.
int RunInferenceModels(const std::string& name, bool json,
                       const std::shared_ptr<grpc::Channel>& channel,
                       const ConnectionOptions& connection) {
  auto stub = inference::GRPCInferenceService::NewStub(channel);
  std::vector<std::string> names = {name};
  if (name.empty()) {
    grpc::ClientContext context;
    SetDeadline(context, connection);
    inference::RepositoryIndexResponse index;
    const grpc::Status status =
        stub->RepositoryIndex(&context, inference::RepositoryIndexRequest(), &index);
    if (!status.ok()) return Fail(status, connection);
    names.clear();
    for (const auto& model : index.models()) names.push_back(model.name());
  }
  for (const std::string& model_name : names) {
    grpc::ClientContext context;
    SetDeadline(context, connection);
    inference::ModelMetadataRequest request;
    request.set_name(model_name);
    inference::ModelMetadataResponse metadata;
    const grpc::Status status = stub->ModelMetadata(&context, request, &metadata);
    if (!status.ok()) return Fail(status, connection);
    if (json) {
      std::cout << Json(metadata) << "\n";
      continue;
    }
    std::vector<std::string> inputs, outputs;
    for (const auto& tensor : metadata.inputs()) inputs.push_back(TensorText(tensor));
    for (const auto& tensor : metadata.outputs()) outputs.push_back(TensorText(tensor));
    std::cout << absl::StrFormat(
        "%s version %s (platform %s)\n  inputs        %s\n  outputs       %s\n", metadata.name(),
        absl::StrJoin(metadata.versions(), ", "), metadata.platform(), absl::StrJoin(inputs, "; "),
        absl::StrJoin(outputs, "; "));
  }
  return 0;
}

}  // namespace

int RunModels(const std::string& name, bool json, const ConnectionOptions& connection,
              const std::string& protocol) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = Connect(connection);
  if (!channel.ok()) return FailBeforeCalling(channel.status());
  if (protocol == "v2") return RunInferenceModels(name, json, *channel, connection);
  auto stub = vidclf::v1::VideoClassifier::NewStub(*channel);
  grpc::ClientContext context;
  SetDeadline(context, connection);
  if (!name.empty()) {
    vidclf::v1::GetModelRequest request;
    request.set_name(name);
    vidclf::v1::ModelInfo model;
    const grpc::Status status = stub->GetModel(&context, request, &model);
    if (!status.ok()) return Fail(status, connection);
    if (json) {
      std::cout << Json(model) << "\n";
    } else {
      PrintModel(model);
    }
    return 0;
  }
  vidclf::v1::ListModelsResponse models;
  const grpc::Status status = stub->ListModels(&context, vidclf::v1::ListModelsRequest(), &models);
  if (!status.ok()) return Fail(status, connection);
  if (json) {
    std::cout << Json(models) << "\n";
    return 0;
  }
  for (const vidclf::v1::ModelInfo& model : models.models()) PrintModel(model);
  return 0;
}

int RunHealth(const std::string& service, bool wait, const ConnectionOptions& connection) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = Connect(connection);
  if (!channel.ok()) return FailBeforeCalling(channel.status());
  auto stub = grpc::health::v1::Health::NewStub(*channel);
  const absl::Time deadline = absl::Now() + absl::Seconds(connection.timeout_seconds);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  while (true) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    // A server still starting refuses connections: waiting for ready rides that out.
    context.set_wait_for_ready(wait);
    grpc::health::v1::HealthCheckResponse response;
    const grpc::Status status = stub->Check(&context, request, &response);
    const bool serving =
        status.ok() && response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
    if (serving || !wait || absl::Now() + kHealthPoll >= deadline) {
      if (!status.ok()) return Fail(status, connection);
      std::cout << grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status())
                << "\n";
      return serving ? 0 : 1;
    }
    absl::SleepFor(kHealthPoll);
  }
}

}  // namespace vidclf::client
