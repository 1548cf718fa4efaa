// libFuzzer target: the JSON bodies of the REST doors over arbitrary bytes, through the code the
// routes run on them. The first byte picks the body:
//   even: POST /v2/models/NAME/infer (server/http/inference_rest.cc): the Open Inference
//     Protocol's JSON, its binary tensors after it when bit 1 is set (the next two bytes, little
//     endian, are then Inference-Header-Content-Length), parsed (http/infer_json.h), read as a
//     classification (service/inference_tensors.h), and answered with the outputs it asked for;
//   odd: POST and PATCH /v1/sources (server/http/sources_rest.cc): a Source, parsed, its fields
//     and its URI checked (sources/source_fields.h, media/uri_allowlist.h), and written back as
//     the answer, the state file and MQTT write it.
// A crash, a sanitizer report, an escaped exception, an answer or error body that is not valid
// JSON (nlohmann's parser refuses bytes that are not UTF-8), or a Source written that does not
// read back is a finding. Seeds: scripts/media-sanitizer-check.sh.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/string_view.h"
#include "common/proto_json.h"
#include "inference/grpc_service.pb.h"
#include "media/uri_allowlist.h"
#include "server/http/http_server.h"
#include "server/http/infer_json.h"
#include "server/service/inference_tensors.h"
#include "server/sources/source_fields.h"
#include "vidclf/v1/sources.pb.h"
#include "vidclf/v1/video_classifier.pb.h"

namespace {

using vidclf::http::HttpResponse;

[[noreturn]] void Finding(const char* what, absl::string_view text) {
  std::fprintf(stderr, "json_bodies_fuzzer: %s: %.*s\n", what, static_cast<int>(text.size()),
               text.data());
  std::abort();
}

// `text` must be one JSON value whose strings are valid UTF-8, as every client may assume.
void ExpectJson(const char* what, absl::string_view text) {
  if (!nlohmann::json::accept(text.begin(), text.end())) Finding(what, text);
}

// An error as the doors answer it: {"error": MESSAGE}.
void ExpectErrorBody(const absl::Status& status) {
  const HttpResponse error = vidclf::http::JsonError(400, status.message());
  ExpectJson("an error body that is not JSON", error.body);
}

// The JSON of an answer: all of it, or its first Inference-Header-Content-Length bytes.
absl::string_view JsonOf(const HttpResponse& response) {
  for (const auto& [name, value] : response.headers) {
    if (name == "Inference-Header-Content-Length") {
      const size_t length = std::strtoull(value.c_str(), nullptr, 10);
      if (length > response.body.size()) Finding("a JSON length past the body", value);
      return absl::string_view(response.body).substr(0, length);
    }
  }
  return response.body;
}

void Infer(absl::string_view body, int64_t json_length) {
  absl::StatusOr<vidclf::http::JsonInferRequest> asked =
      vidclf::http::ParseJsonInferRequest(body, json_length);
  if (!asked.ok()) return ExpectErrorBody(asked.status());
  absl::StatusOr<vidclf::service::InferRequestParts> parts =
      vidclf::service::ParseInferRequest(asked->request);
  if (!parts.ok()) return ExpectErrorBody(parts.status());
  // An answer as a model gives it: what the request asked for, of labels that hold its own text.
  vidclf::v1::ClassifyResponse answer;
  answer.set_model(parts->settings.model());
  answer.set_model_version("1");
  for (const char* label : {"fade_in", "moving_square"}) {
    auto* scored = answer.add_top_k();
    scored->set_label(label);
    scored->set_score(0.5);
  }
  answer.add_top_k()->set_label(parts->settings.attention());
  answer.add_frame_timestamps_seconds(0.25);
  inference::ModelInferResponse response =
      vidclf::service::InferResponseOf(asked->request.id(), parts->outputs, answer);
  ExpectJson("an infer answer that is not JSON",
             JsonOf(vidclf::http::JsonInferResponse(response, *asked)));
}

void Source(absl::string_view body) {
  static const vidclf::media::UriAllowlist* allowlist = [] {
    auto parsed = vidclf::media::UriAllowlist::Parse({"rtsp://camera.lan:554/", "file:/videos/"});
    if (!parsed.ok()) Finding("the allowlist", parsed.status().message());
    return new vidclf::media::UriAllowlist(*std::move(parsed));
  }();
  vidclf::v1::Source source;
  if (auto status = vidclf::ProtoFromJson(body, &source); !status.ok()) {
    return ExpectErrorBody(status);
  }
  if (auto status = vidclf::sources::ValidateSourceFields(source); !status.ok()) {
    return ExpectErrorBody(status);
  }
  if (auto status = allowlist->Check(source.uri()); !status.ok()) return ExpectErrorBody(status);
  const std::string written = vidclf::ProtoJson(source);
  ExpectJson("a Source written that is not JSON", written);
  vidclf::v1::Source read_back;
  if (auto status = vidclf::ProtoFromJson(written, &read_back); !status.ok()) {
    Finding("a Source written that does not read back", written);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t which = data[0];
  absl::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (which % 2 == 1) {
    Source(rest);
    return 0;
  }
  int64_t json_length = -1;
  if ((which & 2) != 0) {
    if (rest.size() < 2) return 0;
    json_length = static_cast<uint8_t>(rest[0]) | static_cast<uint8_t>(rest[1]) << 8;
    rest.remove_prefix(2);
  }
  Infer(rest, json_length);
  return 0;
}
