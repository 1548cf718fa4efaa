// A protobuf message as JSON with the .proto's own field names (source_id, not sourceId), as the
// REST doors, MQTT and the state directory write them.
#ifndef VIDCLF_COMMON_PROTO_JSON_H_
#define VIDCLF_COMMON_PROTO_JSON_H_

#include <google/protobuf/message.h>
#include <google/protobuf/util/json_util.h>

#include <string>

namespace vidclf {

inline std::string ProtoJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string json;
  google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

}  // namespace vidclf

#endif  // VIDCLF_COMMON_PROTO_JSON_H_
