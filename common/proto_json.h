// A protobuf message as JSON with the .proto's own field names (source_id, not sourceId), as the
// REST doors, MQTT and the state directory write them, and back.
#ifndef VIDCLF_COMMON_PROTO_JSON_H_
#define VIDCLF_COMMON_PROTO_JSON_H_

#include <google/protobuf/message.h>
#include <google/protobuf/util/json_util.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace vidclf {

inline std::string ProtoJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string json;
  google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

// `body`, a JSON object with the .proto's field names (or their lowerCamelCase forms), into
// `message`; INVALID_ARGUMENT saying why otherwise.
inline absl::Status ProtoFromJson(absl::string_view body, google::protobuf::Message* message) {
  const auto parsed = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(body.data(), body.size()), message);
  if (parsed.ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("the body is not a JSON ", message->GetTypeName(), ": ",
                   absl::string_view(parsed.message().data(), parsed.message().size())));
}

}  // namespace vidclf

#endif  // VIDCLF_COMMON_PROTO_JSON_H_
