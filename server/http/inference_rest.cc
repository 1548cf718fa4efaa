#include "server/http/inference_rest.h"

#include <google/protobuf/util/json_util.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/json_text.h"
#include "media/quoted_text.h"
#include "server/http/infer_json.h"
#include "server/service/inference_models.h"
#include "server/service/inference_tensors.h"

namespace vidclf::http {
namespace {

using service::Clock;

constexpr char kInferMethod[] = "HttpModelInfer";
constexpr char kClassifyMethod[] = "HttpClassify";

HttpResponse Error(const grpc::Status& status) {
  return JsonError(HttpCodeOf(static_cast<absl::StatusCode>(status.error_code())),
                   status.error_message());
}

HttpResponse Error(const absl::Status& status) {
  return Error(
      grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message())));
}

// Protobuf's JSON writes 64-bit integers as strings; the protocol's JSON has them as numbers.
void Int64sAsNumbers(nlohmann::json& value) {
  static const std::set<std::string> kInt64Fields = {
      "shape",           "dims",
      "count",           "ns",
      "last_inference",  "inference_count",
      "execution_count", "max_queue_delay_microseconds"};
  if (value.is_array()) {
    for (nlohmann::json& element : value) Int64sAsNumbers(element);
    return;
  }
  if (!value.is_object()) return;
  for (auto& [key, field] : value.items()) {
    if (kInt64Fields.count(key) == 0) {
      Int64sAsNumbers(field);
      continue;
    }
    auto number = [](nlohmann::json& text) {
      int64_t parsed = 0;
      if (text.is_string() && absl::SimpleAtoi(text.get<std::string>(), &parsed)) text = parsed;
    };
    if (field.is_array()) {
      for (nlohmann::json& element : field) number(element);
    } else {
      number(field);
    }
  }
}

HttpResponse Json(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string text;
  google::protobuf::util::MessageToJsonString(message, &text, options);
  nlohmann::json json = nlohmann::json::parse(text);
  Int64sAsNumbers(json);
  return HttpResponse{200, "application/json", JsonText(json), {}};
}

// An answer that is its status code alone, as the protocol's health endpoints give.
HttpResponse Empty(unsigned int code) { return HttpResponse{code, "application/json", "", {}}; }

// A call in flight: what the engine reads until it answers.
struct RestCall {
  JsonInferRequest asked;
  service::InferRequestParts parts;
  std::string video;  // classify's body
  vidclf::v1::ClassifyRequest settings;
  vidclf::v1::ClassifyResponse answer;
};

// classify's query into `settings`: the fields of vidclf.v1.ClassifyRequest.
absl::Status SettingsFromQuery(const std::map<std::string, std::string>& query,
                               vidclf::v1::ClassifyRequest* settings) {
  vidclf::v1::SamplingOptions* sampling = settings->mutable_sampling();
  for (const auto& [name, value] : query) {
    uint32_t count = 0;
    double number = 0;
    const bool is_count = absl::SimpleAtoi(value, &count);
    const bool is_number = absl::SimpleAtod(value, &number) && std::isfinite(number);
    const bool is_flag = value == "true" || value == "1" || value == "false" || value == "0";
    bool ok = true;
    if (name == "top_k") {
      ok = is_count;
      settings->set_top_k(count);
    } else if (name == "num_frames") {
      ok = is_count;
      sampling->set_num_frames(count);
    } else if (name == "stride_frames") {
      ok = is_count;
      sampling->set_stride_frames(count);
    } else if (name == "frames_per_second") {
      ok = is_number;
      sampling->set_frames_per_second(number);
    } else if (name == "start_seconds") {
      ok = is_number;
      sampling->set_start_seconds(number);
    } else if (name == "snap_to_keyframes" || name == "skip_loop_filter") {
      ok = is_flag;
      const bool on = value == "true" || value == "1";
      name == "snap_to_keyframes" ? sampling->set_snap_to_keyframes(on)
                                  : sampling->set_skip_loop_filter(on);
    } else if (name == "sampling") {
      sampling->set_strategy(value);
    } else if (name == "attention") {
      settings->set_attention(value);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown query parameter ", media::QuoteInput(name),
          ": classify takes top_k, num_frames, sampling, frames_per_second, stride_frames, "
          "start_seconds, snap_to_keyframes, skip_loop_filter and attention"));
    }
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat("query parameter ", name, ": ",
                                                     media::QuoteInput(value),
                                                     " is not a valid value for it"));
    }
  }
  return absl::OkStatus();
}

// A call the engine abandons if `request`'s client closes its connection before the answer
// (decoding stops; the call counts as CANCELLED), as gRPC's calls are when their clients go.
std::shared_ptr<service::CancellableCall> CancelIfClientGoes(const HttpRequest& request) {
  auto cancellable =
      std::make_shared<service::CancellableCall>(std::chrono::system_clock::time_point::max());
  if (request.on_client_gone) request.on_client_gone([cancellable] { cancellable->Cancel(); });
  return cancellable;
}

}  // namespace

bool InferenceRest::IsHealthCheck(absl::string_view path) {
  return absl::StartsWith(path, "/v2/health/") ||
         (absl::StartsWith(path, "/v2/models/") && absl::EndsWith(path, "/ready"));
}

void InferenceRest::Handle(HttpRequest request, Responder respond) const {
  std::vector<std::string> parts = absl::StrSplit(request.path, '/', absl::SkipEmpty());
  if (parts.empty() || parts[0] != "v2") {
    respond(JsonError(404,
                      "this server's HTTP endpoints are under /v2 (the Open Inference "
                      "Protocol) and /v2/models/NAME/classify"));
    return;
  }
  const bool get = request.method == "GET";
  if (parts.size() == 1 && get) {
    nlohmann::json metadata = {
        {"name", "vidclf"},
        {"version", VIDCLF_VERSION},
        {"extensions", {"parameters", "model_configuration", "statistics", "binary_tensor_data"}}};
    respond(HttpResponse{200, "application/json", JsonText(metadata), {}});
    return;
  }
  if (parts.size() == 3 && parts[1] == "health" && get) {
    if (parts[2] == "live") return respond(Empty(200));
    if (parts[2] == "ready") return respond(Empty(engine_->draining() ? 503 : 200));
  }
  if (parts.size() == 3 && parts[1] == "repository" && parts[2] == "index" &&
      request.method == "POST") {
    // The repository extension's answer is the list alone; `ready` in the body filters nothing.
    const inference::RepositoryIndexResponse served =
        service::RepositoryIndexOf(*engine_->repository());
    nlohmann::json index = nlohmann::json::array();
    for (const auto& model : served.models()) {
      index.push_back(
          {{"name", model.name()}, {"version", model.version()}, {"state", model.state()}});
    }
    respond(HttpResponse{200, "application/json", JsonText(index), {}});
    return;
  }
  if (parts.size() >= 3 && parts[1] == "models") {
    std::string version;
    std::vector<std::string> rest(parts.begin() + 3, parts.end());
    if (rest.size() >= 2 && rest[0] == "versions") {
      version = rest[1];
      rest.erase(rest.begin(), rest.begin() + 2);
    }
    HandleModel(std::move(request), parts[2], version, rest, std::move(respond));
    return;
  }
  respond(JsonError(404, absl::StrCat("no endpoint ", media::QuoteInput(request.method), " ",
                                      media::QuoteInput(request.path, 128))));
}

void InferenceRest::HandleModel(HttpRequest request, const std::string& name,
                                const std::string& version, const std::vector<std::string>& rest,
                                Responder respond) const {
  const std::string what = rest.empty() ? "" : rest[0];
  const bool get = request.method == "GET";
  if (rest.size() <= 1 && request.method == "POST" && what == "infer") {
    Infer(std::move(request), name, version, std::move(respond));
    return;
  }
  if (rest.size() <= 1 && request.method == "POST" && what == "classify" && version.empty()) {
    Classify(std::move(request), name, std::move(respond));
    return;
  }
  const std::shared_ptr<const engine::ModelRepository> repository = engine_->repository();
  const absl::StatusOr<const engine::ModelRepository::Entry*> entry =
      service::FindServedModel(*repository, name, version);
  if (get && what == "ready" && rest.size() == 1) {
    respond(Empty(entry.ok() && !engine_->draining() ? 200 : entry.ok() ? 503 : 404));
    return;
  }
  if (!get || rest.size() > 1 || (what != "" && what != "config" && what != "stats")) {
    respond(JsonError(404, absl::StrCat("no endpoint ", media::QuoteInput(request.method), " ",
                                        media::QuoteInput(request.path, 128))));
    return;
  }
  if (!entry.ok()) return respond(Error(entry.status()));
  if (what.empty()) return respond(Json(service::ModelMetadataOf(**entry)));
  if (what == "config") {
    return respond(
        Json(service::ModelConfigOf(**entry, engine_->options().batching.max_queue_delay)));
  }
  inference::ModelStatisticsResponse statistics;
  *statistics.add_model_stats() = service::ModelStatisticsOf(
      **entry, metrics_->InferenceTotalsOf((*entry)->model->config().name));
  respond(Json(statistics));
}

void InferenceRest::Infer(HttpRequest request, const std::string& name, const std::string& version,
                          Responder respond) const {
  const Clock::time_point start = Clock::now();
  auto call = std::make_shared<RestCall>();
  int64_t json_length = -1;
  const auto header = request.headers.find("inference-header-content-length");
  if (header != request.headers.end() && !absl::SimpleAtoi(header->second, &json_length)) {
    json_length = static_cast<int64_t>(request.body.size()) + 1;  // refused below
  }
  absl::StatusOr<JsonInferRequest> asked = ParseJsonInferRequest(request.body, json_length);
  absl::Status status = asked.status();
  if (status.ok()) {
    call->asked = *std::move(asked);
    call->asked.request.set_model_name(name);
    call->asked.request.set_model_version(version);
    // Its video views the call's request.
    absl::StatusOr<service::InferRequestParts> parts =
        service::ParseInferRequest(call->asked.request);
    if (parts.ok()) call->parts = *std::move(parts);
    status = parts.status();
  }
  if (!status.ok()) {
    respond(Error(submitter_.Refuse(kInferMethod, request.peer, nullptr, start, status)));
    return;
  }
  const absl::Status found =
      service::FindServedModel(*engine_->repository(), name, version).status();
  absl::StatusOr<engine::ClassifyInput> input =
      found.ok() ? service::InputFromSettings(call->parts.settings,
                                              std::chrono::system_clock::time_point::max())
                 : absl::StatusOr<engine::ClassifyInput>(found);
  if (!input.ok()) {
    respond(Error(submitter_.Refuse(kInferMethod, request.peer, &call->parts.settings, start,
                                    input.status())));
    return;
  }
  // The call holds the request's bytes, which the input's source views, until it is answered.
  input->source = call->parts.settings.uri().empty()
                      ? media::VideoSource::Bytes(call->parts.video())
                      : media::VideoSource::Uri(call->parts.settings.uri());
  const std::shared_ptr<service::CancellableCall> cancellable = CancelIfClientGoes(request);
  cancellable->Adopt(submitter_.Submit(
      kInferMethod, request.peer, *std::move(input), start, &call->answer,
      [call, respond](const grpc::Status& status) {
        if (!status.ok()) return respond(Error(status));
        respond(JsonInferResponse(
            service::InferResponseOf(call->asked.request.id(), call->parts.outputs, call->answer),
            call->asked));
      }));
}

void InferenceRest::Classify(HttpRequest request, const std::string& name,
                             Responder respond) const {
  const Clock::time_point start = Clock::now();
  auto call = std::make_shared<RestCall>();
  call->settings.set_model(name);
  if (absl::Status status = SettingsFromQuery(request.query, &call->settings); !status.ok()) {
    respond(
        Error(submitter_.Refuse(kClassifyMethod, request.peer, &call->settings, start, status)));
    return;
  }
  absl::StatusOr<engine::ClassifyInput> input =
      service::InputFromSettings(call->settings, std::chrono::system_clock::time_point::max());
  if (!input.ok()) {
    respond(Error(
        submitter_.Refuse(kClassifyMethod, request.peer, &call->settings, start, input.status())));
    return;
  }
  call->video = std::move(request.body);
  input->source = media::VideoSource::Bytes(call->video);
  const std::shared_ptr<service::CancellableCall> cancellable = CancelIfClientGoes(request);
  cancellable->Adopt(submitter_.Submit(kClassifyMethod, request.peer, *std::move(input), start,
                                       &call->answer, [call, respond](const grpc::Status& status) {
                                         respond(status.ok() ? Json(call->answer) : Error(status));
                                       }));
}

}  // namespace vidclf::http
