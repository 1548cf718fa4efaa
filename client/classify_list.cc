#include "client/classify_list.h"

#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/classify_client.h"
#include "client/segments_command.h"
#include "common/json_text.h"
#include "nlohmann/json.hpp"
#include "vidclf/v1/video_classifier.grpc.pb.h"

namespace vidclf::client {
namespace {

// The list's entries that belong to `shard`: blank lines and '#' comments are not entries.
absl::StatusOr<std::vector<std::string>> ReadShard(const std::string& path, Shard shard) {
  std::ifstream file(path);
  if (!file) return absl::NotFoundError(absl::StrCat("--from-list: cannot read ", path));
  std::vector<std::string> entries;
  std::string line;
  int position = 0;
  while (std::getline(file, line)) {
    const absl::string_view entry = absl::StripAsciiWhitespace(line);
    if (entry.empty() || absl::StartsWith(entry, "#")) continue;
    if (position++ % shard.count == shard.index) entries.emplace_back(entry);
  }
  return entries;
}

// Refusals that another try would meet again.
constexpr grpc::StatusCode kRefusedForWhatItIs[] = {grpc::StatusCode::INVALID_ARGUMENT,
                                                    grpc::StatusCode::NOT_FOUND,
                                                    grpc::StatusCode::PERMISSION_DENIED};

bool RefusedForWhatItIs(grpc::StatusCode code) {
  return std::find(std::begin(kRefusedForWhatItIs), std::end(kRefusedForWhatItIs), code) !=
         std::end(kRefusedForWhatItIs);
}

std::string CodeName(grpc::StatusCode code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

// Whether a line's code (a name, as CodeName writes it) settles its video for good.
bool Settled(const std::string& code) {
  if (code == CodeName(grpc::StatusCode::OK)) return true;
  return std::any_of(std::begin(kRefusedForWhatItIs), std::end(kRefusedForWhatItIs),
                     [&code](grpc::StatusCode refused) { return code == CodeName(refused); });
}

// Keeps the lines of `path` (if it exists) that settle a video, rewriting it without the others
// (calls to try again, a line cut short); returns the videos they settle, with their codes.
absl::StatusOr<std::map<std::string, std::string>> KeepSettledLines(const std::string& path) {
  std::map<std::string, std::string> settled;
  std::ifstream in(path);
  if (!in) return settled;
  std::string kept, line;
  while (std::getline(in, line)) {
    const nlohmann::json json = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!json.is_object() || !json.contains("source") || !json.contains("code") ||
        !json["source"].is_string() || !json["code"].is_string() ||
        !Settled(json["code"].get<std::string>())) {
      continue;
    }
    settled[json["source"].get<std::string>()] = json["code"].get<std::string>();
    absl::StrAppend(&kept, line, "\n");
  }
  // A rename, so that a run killed now leaves the old file or the new one, whole.
  const std::string temporary = path + ".resume";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << kept;
    if (!out.flush()) return absl::PermissionDeniedError("--output: cannot write " + temporary);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    return absl::PermissionDeniedError("--output: cannot replace " + path);
  }
  return settled;
}

// The video `source` names, whole in the request or as its URI; NOT_FOUND for a file that cannot
// be read.
template <typename Request>
grpc::Status SetSource(const std::string& source, Request* request) {
  if (absl::StrContains(source, "://")) {
    request->set_uri(source);
  } else if (!ReadVideo(source, request->mutable_video())) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "cannot read " + source);
  }
  return grpc::Status::OK;
}

// Classifies `source`; its answer goes into `line` as "response".
grpc::Status ClassificationOf(const ClassifyClient& client, const std::string& source,
                              const ClassifyOptions& options, nlohmann::json* line) {
  vidclf::v1::ClassifyRequest request = SettingsFrom(options);
  if (grpc::Status status = SetSource(source, &request); !status.ok()) return status;
  grpc::ClientContext context;
  SetDeadline(context, options.connection);
  vidclf::v1::ClassifyResponse response;
  const grpc::Status status =
      client.Classify(&context, client.Prepare(std::move(request)), &response);
  if (status.ok()) {
    google::protobuf::util::JsonPrintOptions json_options;
    json_options.preserve_proto_field_names = true;
    std::string json;
    google::protobuf::util::MessageToJsonString(response, &json, json_options);
    (*line)["response"] = nlohmann::json::parse(json);
  }
  return status;
}

// Finds the segments of `source` with the server's defaults for them (ClassifySegments); they go
// into `line` as "segments", with the frames decoded and embedded.
grpc::Status SegmentsOf(vidclf::v1::VideoClassifier::Stub& stub, const std::string& source,
                        const ClassifyOptions& options, nlohmann::json* line) {
  SegmentsOptions settings;
  settings.model = options.model;
  settings.attention = options.attention;
  vidclf::v1::ClassifySegmentsRequest request = SegmentsSettingsFrom(settings);
  if (grpc::Status status = SetSource(source, &request); !status.ok()) return status;
  grpc::ClientContext context;
  if (options.connection.timeout_seconds > 0) SetDeadline(context, options.connection);
  nlohmann::json segments = nlohmann::json::array();
  uint64_t frames_seen = 0, frames_embedded = 0;
  const grpc::Status status =
      ReadSegments(stub, context, request, [&](const vidclf::v1::ClassifySegmentsResponse& r) {
        for (const vidclf::v1::SegmentEvent& event : r.events()) {
          if (event.kind() == vidclf::v1::SegmentEvent::SEGMENT_END) {
            segments.push_back(SegmentJson(event));
          }
        }
        frames_seen = r.frames_seen();
        frames_embedded = r.frames_embedded();
      });
  if (status.ok()) {
    (*line)["segments"] = std::move(segments);
    (*line)["frames_seen"] = frames_seen;
    (*line)["frames_embedded"] = frames_embedded;
  }
  return status;
}

}  // namespace

absl::StatusOr<Shard> ParseShard(absl::string_view text) {
  const std::vector<absl::string_view> parts = absl::StrSplit(text, '/');
  Shard shard;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &shard.index) ||
      !absl::SimpleAtoi(parts[1], &shard.count) || shard.count < 1 || shard.index < 0 ||
      shard.index >= shard.count) {
    return absl::InvalidArgumentError(
        absl::StrCat("--shard must be I/N with 0 <= I < N, not \"", text, "\""));
  }
  return shard;
}

int RunClassifyList(const std::string& list_path, const std::string& shard_text,
                    const std::string& output_path, const ClassifyOptions& options, bool segments) {
  absl::StatusOr<Shard> shard = ParseShard(shard_text);
  if (!shard.ok()) return FailBeforeCalling(shard.status());
  absl::StatusOr<std::vector<std::string>> sources = ReadShard(list_path, *shard);
  if (!sources.ok()) return FailBeforeCalling(sources.status());
  std::map<std::string, std::string> settled;
  std::ofstream output_file;
  if (!output_path.empty()) {
    absl::StatusOr<std::map<std::string, std::string>> kept = KeepSettledLines(output_path);
    if (!kept.ok()) return FailBeforeCalling(kept.status());
    settled = *std::move(kept);
    output_file.open(output_path, std::ios::app);
    if (!output_file) {
      return FailBeforeCalling(
          absl::PermissionDeniedError("--output: cannot write " + output_path));
    }
  }
  std::ostream& out = output_path.empty() ? std::cout : output_file;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = Connect(options.connection);
  if (!channel.ok()) return FailBeforeCalling(channel.status());
  const ClassifyClient client(*channel, options.protocol);
  auto stub = vidclf::v1::VideoClassifier::NewStub(*channel);

  int classified = 0, refused = 0, failed = 0, already = 0;
  for (const std::string& source : *sources) {
    if (const auto found = settled.find(source); found != settled.end()) {
      ++already;
      if (found->second != "OK") ++refused;  // the exit code tells the whole shard
      continue;
    }
    nlohmann::json line = {{"source", source}};
    const grpc::Status status = segments ? SegmentsOf(*stub, source, options, &line)
                                         : ClassificationOf(client, source, options, &line);
    line["code"] = CodeName(status.error_code());
    if (status.ok()) {
      ++classified;
    } else {
      ++(RefusedForWhatItIs(status.error_code()) ? refused : failed);
      line["error"] = status.error_message();
    }
    out << JsonText(line) << std::endl;
    if (!out) {
      return FailBeforeCalling(absl::DataLossError("--output: cannot write " + output_path));
    }
  }
  std::cerr << "vidclf: shard " << shard->index << "/" << shard->count << " of " << list_path
            << ": " << sources->size() << " videos, " << already << " answered before; "
            << classified << " classified, " << refused << " refused for what they are, " << failed
            << " failed\n";
  if (failed > 0) return 1;
  return refused > 0 ? 3 : 0;
}

}  // namespace vidclf::client
